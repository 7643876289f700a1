//! Text form of IR programs, for failure reports: one line per node, refs as `%n`, sub-graphs
//! indented.
//! May not touch: the programs it prints, the saved JSON form, `.pte` bytes, the runtime.

use super::program::*;
use std::fmt::Write as _;

fn ty(t: &ValueType) -> String {
    match t {
        ValueType::Tensor { dtype, shape, dynamic } => {
            format!("{dtype:?}{shape:?}{}", if *dynamic { "?" } else { "" }).to_lowercase()
        }
        ValueType::Int => "int".into(),
        ValueType::Bool => "bool".into(),
        ValueType::Double => "double".into(),
    }
}

fn refs(r: &[Ref]) -> String {
    r.iter().map(|x| format!("%{x}")).collect::<Vec<_>>().join(", ")
}

fn graph(g: &Graph, modules: &[LoweredModule], indent: usize, out: &mut String) {
    let pad = "  ".repeat(indent);
    let mut next = 0usize;
    for c in &g.constants {
        let _ = writeln!(out, "{pad}%{next} = const {}", ty(&ValueType::tensor(c.dtype, c.shape.clone())));
        next += 1;
    }
    for t in &g.inputs {
        let _ = writeln!(out, "{pad}%{next} = input {}", ty(t));
        next += 1;
    }
    for n in &g.nodes {
        let n_out = match n {
            Node::Op { .. } | Node::Map { .. } => 1,
            Node::Call { module, .. } => modules.get(*module).map_or(1, |m| m.graph.outputs.len()),
            Node::Cond { then_graph, .. } => then_graph.outputs.len(),
            Node::Scan { body, .. } => body.outputs.len(),
            Node::While { carried, .. } => carried.len(),
        };
        let lhs = |k: usize| (next..next + k).map(|x| format!("%{x}")).collect::<Vec<_>>().join(", ");
        match n {
            Node::Op { op, args } => {
                let _ = writeln!(out, "{pad}{} = {:?}({})", lhs(1), op, refs(args));
            }
            Node::Call { module, args } => {
                let _ = writeln!(out, "{pad}{} = call module{module}({})", lhs(n_out), refs(args));
            }
            Node::Cond { pred, then_graph, else_graph, operands } => {
                let _ = writeln!(out, "{pad}{} = cond %{pred} ({})", lhs(n_out), refs(operands));
                let _ = writeln!(out, "{pad}  then:");
                graph(then_graph, modules, indent + 2, out);
                let _ = writeln!(out, "{pad}  else:");
                graph(else_graph, modules, indent + 2, out);
            }
            Node::Map { body, xs, args } => {
                let _ = writeln!(out, "{pad}{} = map over %{xs} ({})", lhs(1), refs(args));
                graph(body, modules, indent + 2, out);
            }
            Node::Scan { body, init, xs } => {
                let _ = writeln!(out, "{pad}{} = scan init ({}) over ({})", lhs(n_out), refs(init), refs(xs));
                graph(body, modules, indent + 2, out);
            }
            Node::While { cond, body, carried, max_iterations } => {
                let _ = writeln!(out, "{pad}{} = while ({}) max {max_iterations}", lhs(n_out), refs(carried));
                let _ = writeln!(out, "{pad}  cond:");
                graph(cond, modules, indent + 2, out);
                let _ = writeln!(out, "{pad}  body:");
                graph(body, modules, indent + 2, out);
            }
        }
        next += n_out;
    }
    let _ = writeln!(out, "{pad}return {}", refs(&g.outputs));
}

/// The whole program as text.
pub fn program(p: &IrProgram) -> String {
    let mut out = String::new();
    for (i, m) in p.modules.iter().enumerate() {
        let specs: Vec<String> = m.compile_specs.iter().map(|(k, v)| format!("{k}={}", hex::encode(&v.0))).collect();
        let _ = writeln!(
            out,
            "module{i}: backend {} share_handle_across_calls={} scratch={:?} specs [{}] ({} B processed)",
            m.backend,
            m.share_handle_across_calls,
            m.scratch_specs.iter().map(|s| s.nbytes).collect::<Vec<_>>(),
            specs.join(", "),
            m.processed.len()
        );
        graph(&m.graph, &p.modules, 1, &mut out);
    }
    for m in &p.methods {
        let _ = writeln!(out, "method {}:", m.name);
        graph(&m.graph, &p.modules, 1, &mut out);
    }
    out
}
