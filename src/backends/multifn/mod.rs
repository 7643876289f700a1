//! The `multifn` test backend (seed 003, C.3): multi-function export into one bundle, and a
//! runtime that can share one loaded model among every delegate of that bundle.
//!
//! Export (`export`): every method's partitions at once. With the `multifunction` compile spec
//! (P8) on every partition, ONE bundle holds one function per partition named `<method>_<i>`
//! (P9) and every weight once (deduplicated by content); it is stored once in the named-data
//! store under `<export_hash>/<file>`; each delegate's processed bytes are its own manifest
//! (P10). Without the spec, each partition gets its own single-function bundle (one model per
//! delegate). Partitions that fall back to CPU are ordinary IR ops between the calls.
//!
//! Runtime (`MultifnBackend`): options `share_multifunction_model` (bool), `cache_dir`
//! (string, default a temp dir, made and identified once per process) and `compute_units`
//! (string, default `all`). Sharing on: the model is acquired from the process-wide
//! [`table::ModelTable`] keyed by (cache directory device + inode, export hash + compute
//! units); executions on one model are serialised.
//! May not touch: the eager interpreter (`ir::eval`), the emitter, the loader.

mod sync;
pub mod table;

use crate::backends::blob_cache::{BlobCache, compiled};
use crate::backends::graph::{BLOB_METHOD, compile};
use crate::ir::infer::{IrError, graph_types};
use crate::ir::{ConstTensor, Graph, HexBytes, LoweredModule, NamedBlob};
use crate::program::{CompileSpec, sha256_hex};
use crate::runtime::frame::{OpError, OpResult};
use crate::runtime::value::checked_numel;
use crate::runtime::{Backend, BackendHandle, DelegateArgs, ErrorCode, InitContext, NestedPlan};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use table::{AcquireError, ModelKey, ModelTable, Resident};
use thiserror::Error;

/// Registry id.
pub const ID: &str = "multifn";
/// Compile spec marking a partition multi-function (P8): value `[1]`.
pub const MULTIFUNCTION_SPEC: &str = "multifunction";
/// Compile spec of input enumerations (incompatible with multi-function, MF6).
pub const INPUT_ENUMERATIONS_SPEC: &str = "input_enumerations";
/// Runtime option enabling the shared model (MF7).
pub const SHARE_OPTION: &str = "share_multifunction_model";

/// Compile specs as (key, value) pairs.
pub type Specs = Vec<(String, Vec<u8>)>;

/// One method's partitions, each with its compile specs.
#[derive(Clone, Debug)]
pub struct MethodPartitions {
    /// Method name.
    pub method: String,
    /// Partitions in graph order (P9).
    pub partitions: Vec<(Graph, Specs)>,
}

/// Export errors (MF6), naming the methods involved.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ExportError {
    /// The multi-function option is set on some methods only.
    #[error("multifunction is set for {with:?} but not for {without:?}")]
    MixedOption {
        /// Methods with the option.
        with: Vec<String>,
        /// Methods without it.
        without: Vec<String>,
    },
    /// Partitions of a multi-function export differ in compile specs.
    #[error("partitions of methods {first} and {second} have different compile specs")]
    DifferentSpecs {
        /// One method.
        first: String,
        /// The other.
        second: String,
    },
    /// Input enumerations cannot be combined with multi-function export.
    #[error("input enumerations are set for {methods:?} together with multifunction")]
    InputEnumerations {
        /// Methods with enumerations.
        methods: Vec<String>,
    },
    /// A partition graph is invalid.
    #[error("partition: {0}")]
    Invalid(#[from] IrError),
    /// A constant value the weights file (float32) cannot hold exactly.
    #[error(
        "{function}: constants[{constant}] value {value} is not exactly a float32 (the weights file holds float32)"
    )]
    WeightNotFloat32 {
        /// The bundle function.
        function: String,
        /// Constant index in its graph.
        constant: usize,
        /// The value, as written.
        value: String,
    },
}

/// A function of a bundle: its graph with constant values moved out to the weight table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionDef {
    /// The partition graph; constants keep dtype and shape, their values are in `weights`.
    pub graph: Graph,
    /// Weight index of each constant.
    pub weights: Vec<usize>,
}

/// Where one weight is in the weights file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightRef {
    /// Byte offset.
    pub offset: usize,
    /// Element count.
    pub len: usize,
}

/// The bundle's function table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleIndex {
    /// Functions by name.
    pub functions: BTreeMap<String, FunctionDef>,
    /// Weights in the weights file (float32 little-endian values).
    pub weights: Vec<WeightRef>,
}

/// A delegate's processed bytes (P10).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Function of the bundle this delegate runs.
    pub function: String,
    /// Input names.
    pub input_names: Vec<String>,
    /// Output names.
    pub output_names: Vec<String>,
    /// Multi-function bundle (absent = false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multifunction: Option<bool>,
    /// Hash naming the bundle.
    pub export_hash: String,
    /// Directory of the bundle's files (the named-data key prefix).
    pub path: String,
    /// Files of the bundle.
    pub files: Vec<String>,
}

fn invalid(detail: impl Into<String>) -> OpError {
    OpError::new(ErrorCode::InvalidProgram, detail)
}

/// Parses a manifest (P10): unparseable, missing members or a non-boolean `multifunction` ->
/// InvalidProgram.
pub fn parse_manifest(processed: &[u8]) -> OpResult<Manifest> {
    // A well-formed manifest reads straight into its struct; anything else takes the path
    // below, which says what is wrong.
    if let Ok(m) = serde_json::from_slice::<Manifest>(processed) {
        return Ok(m);
    }
    let v: serde_json::Value =
        serde_json::from_slice(processed).map_err(|e| invalid(format!("manifest is not JSON: {e}")))?;
    if v.get("multifunction").is_some_and(|m| !m.is_boolean() && !m.is_null()) {
        return Err(invalid("manifest member `multifunction` is not a boolean"));
    }
    serde_json::from_value(v).map_err(|e| invalid(format!("manifest: {e}")))
}

fn encode_weights(weights: &[Vec<f64>]) -> (Vec<WeightRef>, Vec<u8>) {
    let mut refs = Vec::with_capacity(weights.len());
    let mut bytes = Vec::new();
    for w in weights {
        refs.push(WeightRef { offset: bytes.len(), len: w.len() });
        for v in w {
            bytes.extend_from_slice(&(*v as f32).to_le_bytes());
        }
    }
    (refs, bytes)
}

/// Builds one bundle from named functions; returns (index JSON, weights bytes). Refuses a
/// constant value float32 does not hold exactly (it would read back as another value).
fn build_bundle(functions: &[(String, Graph)]) -> Result<(Vec<u8>, Vec<u8>), ExportError> {
    let mut index = BundleIndex::default();
    let mut weights: Vec<Vec<f64>> = Vec::new();
    let same = |a: &[f64], b: &[f64]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
    for (name, g) in functions {
        let mut graph = g.clone();
        let mut ids = Vec::with_capacity(graph.constants.len());
        for (k, c) in graph.constants.iter_mut().enumerate() {
            let values = std::mem::take(&mut c.values);
            if let Some(&value) = values.iter().find(|v| !v.is_nan() && f64::from(**v as f32) != **v) {
                return Err(ExportError::WeightNotFloat32 {
                    function: name.clone(),
                    constant: k,
                    value: value.to_string(),
                });
            }
            // Weights shared between functions are stored once (equal bit for bit: -0.0 is
            // not 0.0).
            let id = weights.iter().position(|w| same(w, &values)).unwrap_or_else(|| {
                weights.push(values);
                weights.len() - 1
            });
            ids.push(id);
        }
        index.functions.insert(name.clone(), FunctionDef { graph, weights: ids });
    }
    let (refs, bytes) = encode_weights(&weights);
    index.weights = refs;
    Ok((serde_json::to_vec(&index).unwrap_or_default(), bytes))
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

fn has_spec(specs: &[(String, Vec<u8>)], key: &str) -> bool {
    specs.iter().any(|(k, _)| k == key)
}

/// Multi-method preprocess: lowered modules (methods in order, partitions in order) and the
/// named-data blobs to add to the program.
pub fn export(methods: &[MethodPartitions]) -> Result<(Vec<LoweredModule>, Vec<NamedBlob>), ExportError> {
    for m in methods {
        for (g, _) in &m.partitions {
            graph_types(g, &[], &format!("{}.partition", m.method))?;
        }
    }
    let on = |m: &MethodPartitions| {
        m.partitions.iter().any(|(_, s)| s.iter().any(|(k, v)| k == MULTIFUNCTION_SPEC && v == &[1]))
    };
    let with: Vec<String> = methods.iter().filter(|m| on(m)).map(|m| m.method.clone()).collect();
    let without: Vec<String> =
        methods.iter().filter(|m| !on(m) && !m.partitions.is_empty()).map(|m| m.method.clone()).collect();
    if !with.is_empty() && !without.is_empty() {
        return Err(ExportError::MixedOption { with, without });
    }
    let multifunction = !with.is_empty();
    let mut modules = Vec::new();
    let mut named = Vec::new();
    if multifunction {
        let enums: Vec<String> = methods
            .iter()
            .filter(|m| m.partitions.iter().any(|(_, s)| has_spec(s, INPUT_ENUMERATIONS_SPEC)))
            .map(|m| m.method.clone())
            .collect();
        if !enums.is_empty() {
            return Err(ExportError::InputEnumerations { methods: enums });
        }
        // P8: every partition's full compile-spec list must match, in order.
        let mut reference: Option<(&str, &Specs)> = None;
        for m in methods {
            for (_, specs) in &m.partitions {
                match reference {
                    None => reference = Some((&m.method, specs)),
                    Some((first, r)) if r != specs => {
                        return Err(ExportError::DifferentSpecs { first: first.into(), second: m.method.clone() });
                    }
                    _ => {}
                }
            }
        }
        let functions: Vec<(String, Graph)> = methods
            .iter()
            .flat_map(|m| {
                m.partitions.iter().enumerate().map(move |(i, (g, _))| (format!("{}_{i}", m.method), g.clone()))
            })
            .collect();
        let (index, weights) = build_bundle(&functions)?;
        let hash = sha256_hex(&[index.as_slice(), weights.as_slice()].concat())[..16].to_string();
        let files = vec!["model.json".to_string(), "weights.bin".to_string()];
        named.push(NamedBlob { key: format!("{hash}/model.json"), data: index });
        named.push(NamedBlob { key: format!("{hash}/weights.bin"), data: weights });
        for m in methods {
            for (i, (g, specs)) in m.partitions.iter().enumerate() {
                let manifest = Manifest {
                    function: format!("{}_{i}", m.method),
                    input_names: names("x", g.inputs.len()),
                    output_names: names("y", g.outputs.len()),
                    multifunction: Some(true),
                    export_hash: hash.clone(),
                    path: hash.clone(),
                    files: files.clone(),
                };
                modules.push(module(g, specs, &manifest));
            }
        }
    } else {
        for m in methods {
            for (i, (g, specs)) in m.partitions.iter().enumerate() {
                let function = format!("{}_{i}", m.method);
                let (index, weights) = build_bundle(&[(function.clone(), g.clone())])?;
                // One self-contained file per model: index length, index, weights.
                let mut file = (index.len() as u64).to_le_bytes().to_vec();
                file.extend_from_slice(&index);
                file.extend_from_slice(&weights);
                let hash = sha256_hex(&file)[..16].to_string();
                named.push(NamedBlob { key: format!("{hash}/model.bin"), data: file });
                let manifest = Manifest {
                    function,
                    input_names: names("x", g.inputs.len()),
                    output_names: names("y", g.outputs.len()),
                    multifunction: None,
                    export_hash: hash.clone(),
                    path: hash,
                    files: vec!["model.bin".into()],
                };
                modules.push(module(g, specs, &manifest));
            }
        }
    }
    Ok((modules, named))
}

fn module(g: &Graph, specs: &[(String, Vec<u8>)], manifest: &Manifest) -> LoweredModule {
    LoweredModule {
        backend: ID.into(),
        graph: g.clone(),
        processed: serde_json::to_vec(manifest).unwrap_or_default(),
        compile_specs: specs.iter().map(|(k, v)| (k.clone(), HexBytes(v.clone()))).collect(),
        share_handle_across_calls: false,
        scratch_specs: vec![],
    }
}

/// A loaded model: every function compiled (on load, as an on-device compiler would) to a
/// plan of CPU kernels with its weights filled in.
#[derive(Debug)]
pub struct LoadedModel {
    functions: Arc<BTreeMap<String, NestedPlan>>,
    weight_bytes: usize,
    exec: std::sync::Mutex<()>,
}

impl Resident for LoadedModel {
    fn resident_bytes(&self) -> usize {
        self.weight_bytes
    }
}

fn blob<'a>(named: &[(&str, &'a [u8])], key: &str) -> OpResult<&'a [u8]> {
    named
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, b)| *b)
        .ok_or_else(|| OpError::new(ErrorCode::NotFound, format!("named data `{key}` is missing")))
}

/// Loads a bundle from named data.
pub fn load_model(manifest: &Manifest, named: &[(&str, &[u8])]) -> OpResult<LoadedModel> {
    // The compiled functions are a function of (index, weights): cached by those bytes, laid
    // out as `model.bin` is (index length, index, weights), which is that file itself.
    let (index, weights, key): (&[u8], &[u8], Cow<'_, [u8]>) = if manifest.files.iter().any(|f| f == "model.bin") {
        let file = blob(named, &format!("{}/model.bin", manifest.path))?;
        let n = file
            .get(..8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as usize)
            .ok_or_else(|| invalid("model.bin too short"))?;
        let end = 8usize
            .checked_add(n)
            .filter(|e| *e <= file.len())
            .ok_or_else(|| invalid("model.bin index past its end"))?;
        (&file[8..end], &file[end..], Cow::Borrowed(file))
    } else {
        let index = blob(named, &format!("{}/model.json", manifest.path))?;
        let weights = blob(named, &format!("{}/weights.bin", manifest.path))?;
        let mut key = Vec::with_capacity(8 + index.len() + weights.len());
        key.extend_from_slice(&(index.len() as u64).to_le_bytes());
        key.extend_from_slice(index);
        key.extend_from_slice(weights);
        (index, weights, Cow::Owned(key))
    };
    let functions = compiled(&FUNCTIONS, &key, || compile_functions(index, weights))?;
    Ok(LoadedModel { functions, weight_bytes: weights.len(), exec: std::sync::Mutex::new(()) })
}

thread_local! {
    /// Functions compiled from bundles on this thread.
    pub static FUNCTIONS: RefCell<BlobCache<BTreeMap<String, NestedPlan>>> = RefCell::default();
    /// Manifests read from delegates' processed bytes on this thread.
    pub static MANIFESTS: RefCell<BlobCache<Manifest>> = RefCell::default();
}

/// Compiles every function of a bundle (index JSON, weights) to a plan with its weights filled in.
fn compile_functions(index: &[u8], weights: &[u8]) -> OpResult<BTreeMap<String, NestedPlan>> {
    let index: BundleIndex = serde_json::from_slice(index).map_err(|e| invalid(format!("bundle index: {e}")))?;
    let mut functions = BTreeMap::new();
    for (name, f) in index.functions {
        let mut g = f.graph;
        // One weight reference per constant: none is left over unchecked, none left unfilled.
        if f.weights.len() != g.constants.len() {
            return Err(invalid(format!(
                "{name}: {} weight references for {} constants",
                f.weights.len(),
                g.constants.len()
            )));
        }
        for (c, w) in g.constants.iter_mut().zip(&f.weights) {
            let r = index.weights.get(*w).ok_or_else(|| invalid(format!("{name}: weight {w} missing")))?;
            let bytes = r
                .len
                .checked_mul(4)
                .and_then(|n| r.offset.checked_add(n))
                .and_then(|e| weights.get(r.offset..e))
                .ok_or_else(|| invalid(format!("{name}: weight {w} past the file")))?;
            c.values = bytes.chunks_exact(4).map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))).collect();
        }
        if g.constants.iter().any(|c: &ConstTensor| checked_numel(&c.shape) != Some(c.values.len())) {
            return Err(invalid(format!("{name}: weight sizes do not match")));
        }
        let types = graph_types(&g, &[], &name).map_err(|e| invalid(e.to_string()))?;
        let plan = compile(&g, types)
            .map_err(|e| invalid(format!("{name}: {e}")))
            .and_then(|bytes| NestedPlan::from_pte(&bytes, BLOB_METHOD))?;
        functions.insert(name, plan);
    }
    Ok(functions)
}

struct Handle {
    model: Arc<LoadedModel>,
    key: ModelKey,
    function: String,
}

/// The runtime side.
#[derive(Default)]
pub struct MultifnBackend {
    /// The process-wide table of loaded models.
    pub table: ModelTable<LoadedModel>,
    unshared: AtomicU64,
    /// Loads still to fail (failure injection for the table's invariants).
    fail_loads: AtomicU64,
}

impl MultifnBackend {
    /// Makes the next `n` model loads fail with OutOfResources (the table must then keep no
    /// entry, and a later acquire must load again).
    pub fn fail_next_loads(&self, n: u64) {
        self.fail_loads.store(n, Ordering::SeqCst);
    }

    fn injected_failure(&self) -> bool {
        self.fail_loads.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
    }
}

impl std::fmt::Debug for MultifnBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MultifnBackend({:?})", self.table.totals())
    }
}

/// The identity (device, inode) of cache directory `dir`: AccessFailed when it cannot be read
/// or is not a directory.
fn directory_identity(dir: &std::path::Path) -> Result<(u64, u64), OpError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir)
        .map_err(|e| OpError::new(ErrorCode::AccessFailed, format!("cache directory {}: {e}", dir.display())))?;
    if !meta.is_dir() {
        return Err(OpError::new(
            ErrorCode::AccessFailed,
            format!("cache directory {} is not a directory", dir.display()),
        ));
    }
    Ok((meta.dev(), meta.ino()))
}

/// The identity of the cache directory used when no `cache_dir` option is set: made and read
/// once per process (nothing is read from it afterwards); until that succeeds, every `init`
/// tries again and fails with what went wrong.
fn default_cache_identity() -> Result<(u64, u64), OpError> {
    static IDENTITY: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();
    if let Some(&id) = IDENTITY.get() {
        return Ok(id);
    }
    let dir = std::env::temp_dir().join("ptecheck-multifn-cache");
    // A failure to make it shows as the identity's AccessFailed.
    let _ = std::fs::create_dir_all(&dir);
    let id = directory_identity(&dir)?;
    Ok(*IDENTITY.get_or_init(|| id))
}

fn option_err(code: ErrorCode, what: &str) -> OpError {
    let code = if code == ErrorCode::NotFound { ErrorCode::NotFound } else { ErrorCode::InvalidArgument };
    OpError::new(code, format!("runtime option `{what}` has the wrong type"))
}

impl Backend for MultifnBackend {
    fn id(&self) -> &str {
        ID
    }

    fn init(&self, ctx: &InitContext<'_>, processed: &[u8], _specs: &[CompileSpec]) -> Result<BackendHandle, OpError> {
        // A manifest read before on this thread is not read again (an invalid one is, every time).
        let manifest = compiled(&MANIFESTS, processed, || parse_manifest(processed))?;
        let share = match ctx.options.get_bool(SHARE_OPTION) {
            Ok(b) => b,
            Err(ErrorCode::NotFound) => false,
            Err(c) => return Err(option_err(c, SHARE_OPTION)),
        };
        if share && manifest.multifunction != Some(true) {
            return Err(OpError::new(
                ErrorCode::InvalidArgument,
                format!("{SHARE_OPTION} is on but delegate `{}` is not multi-function", manifest.function),
            ));
        }
        let (dev, ino) = match ctx.options.get_str("cache_dir") {
            Ok(d) => directory_identity(std::path::Path::new(d))?,
            Err(ErrorCode::NotFound) => default_cache_identity()?,
            Err(c) => return Err(option_err(c, "cache_dir")),
        };
        let units = match ctx.options.get_str("compute_units") {
            Ok(u) => u.to_string(),
            Err(ErrorCode::NotFound) => "all".into(),
            Err(c) => return Err(option_err(c, "compute_units")),
        };
        let mut cache_key = format!("{}:{units}", manifest.export_hash);
        if !share {
            // Sharing off: every delegate loads its own model (K delegates -> K loads).
            cache_key.push_str(&format!("#{}", self.unshared.fetch_add(1, Ordering::Relaxed)));
        }
        let key = ModelKey { dev, ino, cache_key };
        let model = self
            .table
            .acquire(&key, || {
                if self.injected_failure() {
                    return Err(OpError::new(ErrorCode::OutOfResources, "injected model load failure"));
                }
                load_model(&manifest, ctx.named_data)
            })
            .map_err(|e| match e {
                AcquireError::Load(e) => e,
                AcquireError::Wait { key, waited } => OpError::new(
                    ErrorCode::Internal,
                    format!("waited {waited:?} for another load of model {} to finish", key.cache_key),
                ),
            })?;
        if !model.functions.contains_key(&manifest.function) {
            self.table.release(&key);
            return Err(invalid(format!("bundle has no function `{}`", manifest.function)));
        }
        let bytes = model.weight_bytes;
        Ok(BackendHandle { state: Box::new(Handle { model, key, function: manifest.function.clone() }), bytes })
    }

    fn execute(&self, handle: &mut BackendHandle, args: &mut DelegateArgs<'_, '_>) -> Result<(), OpError> {
        let h = handle
            .state
            .downcast_ref::<Handle>()
            .ok_or_else(|| OpError::new(ErrorCode::DelegateInvalidHandle, "not a multifn handle"))?;
        let plan = h.model.functions.get(&h.function).ok_or_else(|| invalid("function vanished"))?;
        let (n_in, n_out) = (plan.num_inputs(), plan.num_outputs());
        if args.args.len() != n_in + n_out {
            return Err(OpError::new(
                ErrorCode::InvalidArgument,
                format!("call passes {} args; `{}` takes {n_in} + {n_out}", args.args.len(), h.function),
            ));
        }
        // Delegates sharing one model execute one at a time (MF12).
        let _turn = h.model.exec.lock().unwrap_or_else(|p| p.into_inner());
        plan.call(args).map(|_| ())
    }

    fn destroy(&self, handle: &mut BackendHandle) {
        // A second destroy finds nothing left to release.
        let state = std::mem::replace(&mut handle.state, Box::new(()));
        if let Ok(h) = state.downcast::<Handle>() {
            let key = h.key.clone();
            drop(h);
            self.table.release(&key);
        }
    }
}
