//! Saved-program JSON, the harness's `exir.save` / `exir.load`: the whole IR including lowered
//! modules with their processed bytes, `share_handle_across_calls` and scratch specs, under a
//! schema version. Current version (5, 6) (SH11, P7); (5, 5) documents predate the sharing flag
//! (it loads as false), (5, 4) ones also predate scratch specs. Every rejection names the JSON
//! path.
//! May not touch: the IR's types (it saves and loads them as they are), `.pte` bytes, the runtime.

use super::infer::IrError;
use super::infer::typecheck_program;
use super::program::IrProgram;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The schema version written.
pub const SCHEMA_VERSION: (u32, u32) = (5, 6);

/// Why a saved program was rejected: what is wrong, at which JSON path.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{path}: {fault}")]
pub struct SavedError {
    /// JSON path, e.g. `$.program.modules[0].backend`.
    pub path: String,
    /// What.
    pub fault: SavedFault,
}

/// What is wrong with a saved program.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum SavedFault {
    /// The text is not JSON.
    #[error("not JSON: {message} (line {line}, column {column})")]
    NotJson {
        /// The parser's message.
        message: String,
        /// Line of the fault (1-based).
        line: usize,
        /// Column of the fault (1-based).
        column: usize,
    },
    /// `schema_version` is absent.
    #[error("missing")]
    NoVersion,
    /// `schema_version` is not `[major, minor]`.
    #[error("must be [major, minor]: {0}")]
    BadVersion(String),
    /// A major version this reader does not know.
    #[error("major version {major} is not supported (this reader knows {})", SCHEMA_VERSION.0)]
    Major {
        /// The document's major version.
        major: u32,
    },
    /// A member that a later minor version added, in an older document.
    #[error("unknown member in a ({major}, {minor}) document (added in ({major}, {since}))")]
    TooNew {
        /// The document's major version.
        major: u32,
        /// The document's minor version.
        minor: u32,
        /// The minor version that added the member.
        since: u32,
    },
    /// The document does not have a saved program's shape (the deserialiser's message).
    #[error("{0}")]
    Shape(String),
    /// The program does not type (the type check's message).
    #[error("{0}")]
    Untyped(String),
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
    let mut out = Vec::with_capacity(16 * 1024);
    save_into(p, &mut out);
    // `save_into` writes what serde_json wrote (UTF-8) and a newline.
    String::from_utf8(out).unwrap_or_default()
}

/// [`save`] appended to `out` as UTF-8 bytes (a caller saving many programs reuses one buffer).
pub fn save_into(p: &IrProgram, out: &mut Vec<u8>) {
    #[derive(Serialize)]
    struct DocRef<'a> {
        schema_version: (u32, u32),
        program: &'a IrProgram,
    }
    let mut ser = serde_json::Serializer::with_formatter(&mut *out, Layout::default());
    // Serialising our own types into memory cannot fail.
    let _ = DocRef { schema_version: SCHEMA_VERSION, program: p }.serialize(&mut ser);
    out.push(b'\n');
}

/// The saved layout: objects one member per line, indented by two spaces; arrays of scalars on
/// one line (`[2, 3]`), an array's objects and arrays one per line.
#[derive(Default)]
struct Layout {
    /// Open containers, innermost last.
    open: Vec<Open>,
}

enum Open {
    Object {
        members: bool,
    },
    /// `pending`: an element is about to be written (`Some(first)`); `lines`: an element went on
    /// a line of its own.
    Array {
        pending: Option<bool>,
        lines: bool,
    },
}

impl Layout {
    fn newline<W: ?Sized + std::io::Write>(&self, w: &mut W, depth: usize) -> std::io::Result<()> {
        // A line break and the indentation in one write while the depth fits the run below.
        const BREAK: &[u8; 65] = b"\n                                                                ";
        match BREAK.get(..1 + 2 * depth) {
            Some(line) => w.write_all(line),
            None => {
                w.write_all(b"\n")?;
                (0..depth).try_for_each(|_| w.write_all(b"  "))
            }
        }
    }

    /// Places the next value: inline in an array when it is a scalar, on its own line when it
    /// is a container.
    fn place<W: ?Sized + std::io::Write>(&mut self, w: &mut W, container: bool) -> std::io::Result<()> {
        let depth = self.open.len();
        let Some(Open::Array { pending, lines }) = self.open.last_mut() else { return Ok(()) };
        let Some(first) = pending.take() else { return Ok(()) };
        if !first {
            w.write_all(b",")?;
        }
        if container {
            *lines = true;
            self.newline(w, depth)
        } else if first {
            Ok(())
        } else {
            w.write_all(b" ")
        }
    }
}

macro_rules! scalars {
    ($($name:ident($t:ty)),* $(,)?) => {$(
        fn $name<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: $t) -> std::io::Result<()> {
            self.place(w, false)?;
            serde_json::ser::CompactFormatter.$name(w, v)
        }
    )*};
}

impl serde_json::ser::Formatter for Layout {
    scalars!(
        write_bool(bool),
        write_i8(i8),
        write_i16(i16),
        write_i32(i32),
        write_i64(i64),
        write_i128(i128),
        write_u8(u8),
        write_u16(u16),
        write_u32(u32),
        write_u64(u64),
        write_u128(u128),
        write_f32(f32),
        write_f64(f64),
        write_number_str(&str),
        write_byte_array(&[u8]),
    );

    fn write_null<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.place(w, false)?;
        w.write_all(b"null")
    }

    fn begin_string<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.place(w, false)?;
        w.write_all(b"\"")
    }

    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.place(w, true)?;
        self.open.push(Open::Array { pending: None, lines: false });
        w.write_all(b"[")
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W, first: bool) -> std::io::Result<()> {
        if let Some(Open::Array { pending, .. }) = self.open.last_mut() {
            *pending = Some(first);
        }
        Ok(())
    }

    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        Ok(())
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        if let Some(Open::Array { lines: true, .. }) = self.open.pop() {
            self.newline(w, self.open.len())?;
        }
        w.write_all(b"]")
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.place(w, true)?;
        self.open.push(Open::Object { members: false });
        w.write_all(b"{")
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        self.newline(w, self.open.len())
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        if let Some(Open::Object { members }) = self.open.last_mut() {
            *members = true;
        }
        Ok(())
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        if let Some(Open::Object { members: true }) = self.open.pop() {
            self.newline(w, self.open.len())?;
        }
        w.write_all(b"}")
    }
}

fn at(path: &str, fault: SavedFault) -> SavedError {
    SavedError { path: path.to_string(), fault }
}

/// Loads and type-checks a saved program.
pub fn load(text: &str) -> Result<IrProgram, SavedError> {
    let program = read(text)?;
    typecheck_program(&program).map_err(|e| untyped(&e))?;
    Ok(program)
}

/// [`load`] without its type check (for a caller that has typed an equal program).
pub(crate) fn read(text: &str) -> Result<IrProgram, SavedError> {
    // A document of the current version that deserialises as it stands needs none of the
    // version rules (every member it may hold is current): read it straight from the text.
    // Anything else takes the careful path, which names what is wrong and where.
    let doc = match serde_json::from_str::<Document>(text) {
        Ok(doc) if doc.schema_version == SCHEMA_VERSION => doc,
        _ => read_carefully(text)?,
    };
    Ok(doc.program)
}

/// [`load`]'s rejection of a program that does not type.
pub(crate) fn untyped(e: &IrError) -> SavedError {
    at(&format!("$.program.{}", e.path), SavedFault::Untyped(e.detail.clone()))
}

/// Reads a document of any version this reader knows, naming the JSON path of what is wrong.
fn read_carefully(text: &str) -> Result<Document, SavedError> {
    let raw: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| at("$", SavedFault::NotJson { message: e.to_string(), line: e.line(), column: e.column() }))?;
    let v = VersionOnly::deserialize(&raw).map_err(|e| at("$", SavedFault::Shape(e.to_string())))?;
    let version = v.schema_version.ok_or_else(|| at("$.schema_version", SavedFault::NoVersion))?;
    let (major, minor): (u32, u32) =
        serde_json::from_value(version).map_err(|e| at("$.schema_version", SavedFault::BadVersion(e.to_string())))?;
    if major != SCHEMA_VERSION.0 {
        return Err(at("$.schema_version", SavedFault::Major { major }));
    }
    // Members added by later minors must not appear in older documents.
    if let Some(modules) = raw.pointer("/program/modules").and_then(|m| m.as_array()) {
        for (i, m) in modules.iter().enumerate() {
            for (member, since) in [("share_handle_across_calls", 6), ("scratch_specs", 5)] {
                if minor < since && m.get(member).is_some() {
                    return Err(at(
                        &format!("$.program.modules[{i}].{member}"),
                        SavedFault::TooNew { major, minor, since },
                    ));
                }
            }
        }
    }
    // Read from the text, not from `raw`: a JSON value keeps one of two equal member names,
    // and a member given twice must be named, not dropped.
    let doc: Document =
        serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text)).map_err(|e| {
            let path = e.path().to_string();
            at(&format!("$.{path}"), SavedFault::Shape(e.into_inner().to_string()))
        })?;
    Ok(doc)
}
