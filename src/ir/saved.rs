//! Saved-program JSON, the harness's `exir.save` / `exir.load`: the whole IR including lowered
//! modules with their processed bytes, `share_handle_across_calls` and scratch specs, under a
//! schema version. Current version (5, 6) (SH11, P7); (5, 5) documents predate the sharing flag
//! (it loads as false), (5, 4) ones also predate scratch specs. Every rejection names the JSON
//! path.

use super::IrProgram;
use super::infer::typecheck_program;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The schema version written.
pub const SCHEMA_VERSION: (u32, u32) = (5, 6);

/// Why a saved program was rejected.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{path}: {detail}")]
pub struct SavedError {
    /// JSON path, e.g. `$.program.modules[0].backend`.
    pub path: String,
    /// What.
    pub detail: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    schema_version: (u32, u32),
    program: IrProgram,
}

#[derive(Deserialize)]
struct VersionOnly {
    schema_version: Option<serde_json::Value>,
}

/// Serialises a program (deterministic: save → load → save is identical).
pub fn save(p: &IrProgram) -> String {
    #[derive(Serialize)]
    struct DocRef<'a> {
        schema_version: (u32, u32),
        program: &'a IrProgram,
    }
    let mut s =
        serde_json::to_string_pretty(&DocRef { schema_version: SCHEMA_VERSION, program: p }).unwrap_or_default();
    s.push('\n');
    s
}

fn at(path: &str, detail: impl Into<String>) -> SavedError {
    SavedError { path: path.to_string(), detail: detail.into() }
}

/// Loads and type-checks a saved program.
pub fn load(text: &str) -> Result<IrProgram, SavedError> {
    // A document of the current version that deserialises as it stands needs none of the
    // version rules below (every member it may hold is current): read it straight from the
    // text. Anything else takes the careful path, which names what is wrong and where.
    if let Ok(doc) = serde_json::from_str::<Document>(text)
        && doc.schema_version == SCHEMA_VERSION
    {
        typecheck_program(&doc.program).map_err(|e| at(&format!("$.program.{}", e.path), e.detail))?;
        return Ok(doc.program);
    }
    let raw: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| at("$", format!("not JSON: {e} (line {}, column {})", e.line(), e.column())))?;
    let v = VersionOnly::deserialize(&raw).map_err(|e| at("$", e.to_string()))?;
    let version = v.schema_version.ok_or_else(|| at("$.schema_version", "missing"))?;
    let (major, minor): (u32, u32) =
        serde_json::from_value(version).map_err(|e| at("$.schema_version", format!("must be [major, minor]: {e}")))?;
    if major != SCHEMA_VERSION.0 {
        return Err(at(
            "$.schema_version",
            format!("major version {major} is not supported (this reader knows {})", SCHEMA_VERSION.0),
        ));
    }
    // Members added by later minors must not appear in older documents.
    if let Some(modules) = raw.pointer("/program/modules").and_then(|m| m.as_array()) {
        for (i, m) in modules.iter().enumerate() {
            for (member, since) in [("share_handle_across_calls", 6), ("scratch_specs", 5)] {
                if minor < since && m.get(member).is_some() {
                    return Err(at(
                        &format!("$.program.modules[{i}].{member}"),
                        format!("unknown member in a ({major}, {minor}) document (added in ({major}, {since}))"),
                    ));
                }
            }
        }
    }
    let doc: Document = serde_path_to_error::deserialize(raw).map_err(|e| {
        let path = e.path().to_string();
        at(&format!("$.{path}"), e.into_inner().to_string())
    })?;
    typecheck_program(&doc.program).map_err(|e| at(&format!("$.program.{}", e.path), e.detail))?;
    Ok(doc.program)
}
