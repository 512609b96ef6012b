//! Jsonnet evaluation with jrsonnet.
//!
//! jrsonnet's `State` and `Val` are `!Send`: everything here runs on one thread, made for
//! each evaluation with a stack of [`STACK_BYTES`], and only JSON text leaves it. Why a
//! thread of its own: jrsonnet recurses once per level of the syntax tree and per call, on
//! the caller's stack, which is 8 MiB on a main thread, 2 MiB on tokio's and Rust's other
//! threads: a stack overflow aborts the process. The text's depth is bounded before it is
//! parsed ([`crate::nesting`]), and this stack holds that depth times jrsonnet's call depth
//! ([`MAX_STACK`]), as `deepest_evaluation_fits_the_stack` shows.
//!
//! A config is a local file (imports resolved relative to it on disk) or a text with a name,
//! typically the URL it was fetched from (`s3://bucket/cfg.jsonnet`): jrsonnet knows it as a
//! [`Remote`] source, so error positions show that name, and its imports resolve relative to
//! it as URLs and are read with the caller's [`Fetch`].

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jrsonnet_evaluator::{
    AsPathLike, FileImportResolver, ImportIo, ImportResolver, SourcePath, SourceVirtual, State,
    Val,
    analyze::{DiagLevel, Diagnostic},
    error::ErrorKind,
    manifest::JsonFormat,
    trace::{CompactFormat, PathResolver, TraceFormat},
};
use jrsonnet_gcmodule::Acyclic;
use jrsonnet_ir::SourcePathT;

use crate::error::ConfigLoadError;
use crate::library;

/// The names under which `import` finds the embedded library.
pub const LIBRARY_IMPORT_NAMES: [&str; 2] = ["sluice.libsonnet", "substation.libsonnet"];

/// How deep Jsonnet evaluation may nest (jrsonnet's call-stack depth, set explicitly so the
/// error can name it): jrsonnet's default. Each call may hold an expression as deep as
/// [`crate::nesting::MAX_DEPTH`]; [`STACK_BYTES`] holds both.
pub(crate) const MAX_STACK: usize = 200;

/// The stack of the thread that evaluates a config. The deepest evaluation the bounds allow
/// ([`crate::nesting::MAX_DEPTH`] levels of expression in each of [`MAX_STACK`] calls, the
/// worst being unary operators around a recursive call) fits in half of it in a debug build
/// (`deepest_evaluation_fits_the_stack`; 42 MiB were too few there, 64 MiB enough; release
/// builds were not measured, their frames are usually smaller). It is reserved, not used:
/// the pages a config does not reach are never touched.
pub(crate) const STACK_BYTES: usize = 256 * 1024 * 1024;

/// The stack used instead when the system refuses to reserve [`STACK_BYTES`] (a machine, or
/// a Lambda function, with less memory than that and no overcommit): it still holds a whole
/// [`crate::nesting::MAX_DEPTH`]-deep expression many times over (a few MiB in a debug build),
/// but not that depth in every one of [`MAX_STACK`] recursive calls.
pub(crate) const FALLBACK_STACK_BYTES: usize = 32 * 1024 * 1024;

/// The ext-code variable that holds the library: `std.extVar('sub')`.
pub const LIBRARY_EXT_VAR: &str = "sub";

/// Reads what a config given as text imports: the bytes at an absolute URL (the import
/// resolved against the config's name), or why not.
/// It is `Send`: the evaluation runs on a thread of its own.
pub type Fetch = Box<dyn Fn(&str) -> Result<Vec<u8>, String> + Send>;

/// A source that is not a local file, known by its name (a URL): the config given as text,
/// and what it imports. Error positions show the name as it is.
#[derive(Acyclic, Hash, PartialEq, Eq, Debug)]
struct Remote(String);

impl fmt::Display for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl SourcePathT for Remote {
    fn is_default(&self) -> bool {
        false
    }
    fn path(&self) -> Option<&Path> {
        None
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn dyn_hash(&self, mut hasher: &mut dyn Hasher) {
        self.hash(&mut hasher)
    }
    fn dyn_eq(&self, other: &dyn SourcePathT) -> bool {
        other.as_any().downcast_ref::<Self>() == Some(self)
    }
    fn dyn_debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// `import`'s `path` resolved against `base` as a URL (RFC 3986), when `base` is an absolute
/// URL; an absolute URL as `path` stands for itself.
fn join_url(base: &str, path: &str) -> Option<String> {
    let base = url::Url::parse(base).ok()?;
    if base.cannot_be_a_base() {
        return None;
    }
    base.join(path).ok().map(String::from)
}

/// Resolves imports relative to the importing file, and the library names to the embedded
/// library.
///
/// `import 'sluice.libsonnet'` and `import 'substation.libsonnet'` (a bare name) always
/// give the embedded library, even when a file of that name exists, so that a config gets
/// the library that matches the engine. A path with directories that ends in one of those
/// names (`import '../substation.libsonnet'`) is read from disk when the file exists and
/// falls back to the embedded library when it does not; from a config given as text it is
/// always the embedded library (nothing is fetched for it).
///
/// A config given as text (`main`) resolves its other imports against its name as a URL and
/// reads them with `fetch`; without `fetch`, or when the name is not a URL, it can import
/// only the library.
///
/// Every Jsonnet text it reads is checked against the depth bounds ([`crate::nesting`]);
/// what only `importstr` or `importbin` read is data, never parsed, and not checked (see
/// [`Kinds`]).
#[derive(Acyclic)]
struct Resolver {
    files: FileImportResolver,
    /// The config given as text: its name and its text.
    main: Option<(String, Vec<u8>)>,
    /// Reads the imports of the config given as text.
    fetch: Option<Fetch>,
    /// What the texts read so far import, and how.
    kinds: RefCell<Kinds>,
}

/// Which imports read Jsonnet and which read data. jrsonnet asks for the bytes of both the
/// same way; the path literals of the texts read so far tell them apart: a path that follows
/// only `importstr`/`importbin` (never `import`) is data. A file first read as data is
/// checked when an `import` reaches it, since jrsonnet parses it from what it kept.
#[derive(Default)]
struct Kinds {
    /// The path literals after `import`.
    jsonnet: HashSet<String>,
    /// The path literals after `importstr` or `importbin`.
    data: HashSet<String>,
    /// The files read as data, unchecked.
    read_as_data: HashSet<SourcePath>,
}

fn library_name(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_str()?;
    LIBRARY_IMPORT_NAMES.into_iter().find(|n| *n == name)
}

fn library_path(name: &'static str) -> SourcePath {
    SourcePath::new(SourceVirtual(name.into()))
}

impl ImportResolver for Resolver {
    fn resolve_from(
        &self,
        from: &SourcePath,
        path: &dyn AsPathLike,
    ) -> jrsonnet_evaluator::Result<SourcePath> {
        let resolved = self.resolve_path(from, path)?;
        let literal = path.as_path().as_ref().to_string_lossy().into_owned();
        let is_data = {
            let kinds = self.kinds.borrow();
            kinds.data.contains(&literal) && !kinds.jsonnet.contains(&literal)
        };
        if is_data {
            self.kinds
                .borrow_mut()
                .read_as_data
                .insert(resolved.clone());
        } else if self.kinds.borrow().read_as_data.contains(&resolved) {
            // Read as data before, now imported as Jsonnet: jrsonnet parses what it kept.
            self.checked(&resolved, self.read(&resolved)?)?;
        }
        Ok(resolved)
    }

    /// Every source is read here before jrsonnet parses it, so the depth bounds
    /// ([`crate::nesting`]) are checked here, for the config and each of its Jsonnet imports.
    fn load_file_contents(&self, resolved: &SourcePath) -> jrsonnet_evaluator::Result<Vec<u8>> {
        let bytes = self.read(resolved)?;
        if self.kinds.borrow().read_as_data.contains(resolved) {
            return Ok(bytes);
        }
        self.checked(resolved, bytes)
    }
}

impl Resolver {
    /// `bytes`, the Jsonnet text of `resolved`, if it is within the depth bounds; what it
    /// imports is noted in [`Resolver::kinds`].
    fn checked(
        &self,
        resolved: &SourcePath,
        bytes: Vec<u8>,
    ) -> jrsonnet_evaluator::Result<Vec<u8>> {
        match crate::nesting::check_and_list_imports(&String::from_utf8_lossy(&bytes)) {
            Ok(imports) => {
                let mut kinds = self.kinds.borrow_mut();
                kinds.jsonnet.extend(imports.jsonnet);
                kinds.data.extend(imports.data);
                Ok(bytes)
            }
            Err(e) => Err(ErrorKind::RuntimeError(format!("{resolved}:{e}").into()).into()),
        }
    }

    /// Where `path`, imported from `from`, is (see the type's documentation).
    fn resolve_path(
        &self,
        from: &SourcePath,
        path: &dyn AsPathLike,
    ) -> jrsonnet_evaluator::Result<SourcePath> {
        let requested = path.as_path();
        let requested: &Path = requested.as_ref();
        let lib = library_name(requested);
        if let Some(name) = lib
            && requested.parent().is_none_or(|p| p.as_os_str().is_empty())
        {
            return Ok(library_path(name));
        }
        if let Some(remote) = from.downcast_ref::<Remote>() {
            if let Some(name) = lib {
                return Ok(library_path(name));
            }
            let text = requested.to_string_lossy();
            let joined = self.fetch.as_ref().and_then(|_| join_url(&remote.0, &text));
            return match joined {
                Some(url) => Ok(SourcePath::new(Remote(url))),
                None => Err(ImportIo(format!(
                    "cannot import {text:?} from {remote}: it can import only the library \
                     (sluice.libsonnet, substation.libsonnet)"
                ))
                .into()),
            };
        }
        match self.files.resolve_from(from, path) {
            Ok(found) => Ok(found),
            Err(e) => match lib {
                Some(name) => Ok(library_path(name)),
                None => Err(e),
            },
        }
    }

    /// The bytes of `resolved`: the library, the config's own text, a fetched URL or a file.
    fn read(&self, resolved: &SourcePath) -> jrsonnet_evaluator::Result<Vec<u8>> {
        if let Some(v) = resolved.downcast_ref::<SourceVirtual>()
            && LIBRARY_IMPORT_NAMES.contains(&&*v.0)
        {
            return Ok(library().as_bytes().to_vec());
        }
        if let Some(remote) = resolved.downcast_ref::<Remote>() {
            if let Some((name, text)) = &self.main
                && *name == remote.0
            {
                return Ok(text.clone());
            }
            let Some(fetch) = &self.fetch else {
                return Err(ImportIo(format!("{remote}: cannot read it")).into());
            };
            return fetch(&remote.0).map_err(|e| ImportIo(format!("{remote}: {e}")).into());
        }
        self.files.load_file_contents(resolved)
    }
}

/// jrsonnet's message for `err` and its trace, one frame a line as
/// `    file:line:col: description`, a frame repeated on consecutive lines (a recursion)
/// shown once with its count.
fn trace(err: &jrsonnet_evaluator::Error) -> String {
    collapse_repeats(&trace_lines(err))
}

/// `text` with each run of identical consecutive lines shown once, followed by
/// ` (N times)` when it ran to more than one.
fn collapse_repeats(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut lines = text.split('\n').peekable();
    while let Some(line) = lines.next() {
        let mut n = 1;
        while lines.peek() == Some(&line) {
            lines.next();
            n += 1;
        }
        out.push(if n > 1 {
            format!("{line} ({n} times)")
        } else {
            line.to_string()
        });
    }
    out.join("\n")
}

fn trace_lines(err: &jrsonnet_evaluator::Error) -> String {
    let resolver = PathResolver::new_cwd_fallback();
    let message = err.error().to_string();
    let format = CompactFormat {
        resolver: resolver.clone(),
        max_trace: 20,
        padding: 4,
    };
    let full = format.format(err).unwrap_or_else(|_| message.clone());
    match err.error() {
        // jrsonnet's message joins the diagnostics' messages and drops their places; its
        // frames (the imports that led to the file) follow the message.
        ErrorKind::StaticAnalysisError(diagnostics) => {
            let frames = full.strip_prefix(message.as_str()).unwrap_or("");
            let name = |source: &SourcePath| match source.path() {
                Some(p) => resolver.resolve(p),
                None => source.to_string(),
            };
            format!("{}{frames}", static_analysis_report(diagnostics, name))
        }
        // jrsonnet's message names a `--max-stack` option of its own command line, which
        // sluice does not have.
        ErrorKind::StackOverflow => {
            let frames = full.strip_prefix(message.as_str()).unwrap_or("");
            format!(
                "evaluation nested deeper than {MAX_STACK} calls or values (sluice's limit for \
                 Jsonnet, which no option raises): look for unbounded recursion{frames}"
            )
        }
        _ => full,
    }
}

/// What static analysis found (an undefined local, a local defined twice in one frame, `self`
/// outside an object, ...): a first line with the errors' messages, then each error and then
/// each warning (`unused local: x`, reported beside them) at its place, as
/// `    file:line:col: message`, the form of jrsonnet's trace frames; `name` gives a source's
/// file name.
fn static_analysis_report(
    diagnostics: &[Diagnostic],
    name: impl Fn(&SourcePath) -> String,
) -> String {
    // Each file is analysed on its own: the places are in one text, listed in its order.
    let in_order = |level: DiagLevel| {
        let mut found: Vec<&Diagnostic> = diagnostics.iter().filter(|d| d.level == level).collect();
        found.sort_by_key(|d| d.span.as_ref().map_or(u32::MAX, |s| s.1));
        found
    };
    let mut listed = in_order(DiagLevel::Error);
    let summary: Vec<&str> = listed
        .iter()
        .map(|d| d.message.lines().next().unwrap_or_default())
        .collect();
    let mut out = format!(
        "static analysis {}: {}",
        if summary.len() == 1 {
            "error"
        } else {
            "errors"
        },
        summary.join("; ")
    );
    listed.extend(in_order(DiagLevel::Warning));
    for d in listed {
        out.push_str("\n    ");
        if let Some(span) = &d.span {
            let source = &span.0;
            out.push_str(&name(source.source_path()));
            out.push(':');
            out.push_str(&span_place(source.code(), span.1, span.2));
            out.push_str(": ");
        }
        if d.level == DiagLevel::Warning {
            out.push_str("warning: ");
        }
        // A message may go on with a suggestion ("There is a local with similar name
        // present: ...") on lines of its own.
        let mut lines = d.message.lines();
        out.push_str(lines.next().unwrap_or_default());
        for line in lines {
            out.push_str("\n        ");
            out.push_str(line);
        }
    }
    out
}

/// The 1-based line and column (in characters) of the byte `offset` in `code`.
///
/// jrsonnet's own frames count the offset in characters, which places them too far right
/// after non-ASCII text; spans are byte offsets.
fn line_col(code: &str, offset: u32) -> (usize, usize) {
    let mut offset = (offset as usize).min(code.len());
    while !code.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &code[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

/// The place of the bytes `start..end` of `code` as jrsonnet's frames show it: `line:col`,
/// `line:col-col` (the last column included), or `line:col-line:col`.
fn span_place(code: &str, start: u32, end: u32) -> String {
    let (line, col) = line_col(code, start);
    let (end_line, after_end) = line_col(code, end);
    let end_col = after_end.saturating_sub(1);
    if end_line == line && end_col <= col {
        format!("{line}:{col}")
    } else if end_line == line {
        format!("{line}:{col}-{end_col}")
    } else {
        format!("{line}:{col}-{end_line}:{end_col}")
    }
}

/// jrsonnet reports a field that does not exist (`sub.tf.str.to.uper(...)`, the usual typo
/// in a library call) with no place in the source: none of its trace's frames has a
/// location. Then the place is found in the config's own text: the one spot that indexes a
/// field of that name (`.uper` or `['uper']`), as `    file:line:col: field <uper> access`,
/// the form of jrsonnet's own frames. Nothing is added when the trace has a place, or when
/// the name is indexed in several spots (or only in an imported file).
fn missing_field_place(
    err: &jrsonnet_evaluator::Error,
    name: &Path,
    source: impl FnOnce() -> Option<String>,
) -> Option<String> {
    let jrsonnet_evaluator::error::ErrorKind::NoSuchField(field, _) = err.error() else {
        return None;
    };
    if err.trace().0.iter().any(|f| f.location.is_some()) {
        return None;
    }
    let text = source()?;
    let (line, col) = unique_index_of(&text, field)?;
    Some(format!(
        "\n    {}:{line}:{col}: field <{field}> access",
        name.display()
    ))
}

/// The 1-based line and column of the only place in `text` (outside `//` and `#` line
/// comments) that indexes `field`: `.field` or `['field']` / `["field"]`.
fn unique_index_of(text: &str, field: &str) -> Option<(usize, usize)> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = None;
    for (n, line) in text.lines().enumerate() {
        let code = match line.find("//").into_iter().chain(line.find('#')).min() {
            Some(i) => &line[..i],
            None => line,
        };
        let candidates = [
            format!(".{field}"),
            format!("['{field}']"),
            format!("[\"{field}\"]"),
        ];
        for pat in &candidates {
            for (i, _) in code.match_indices(pat.as_str()) {
                let after = code[i + pat.len()..].chars().next();
                if pat.starts_with('.') && after.is_some_and(ident) {
                    continue;
                }
                if found.is_some() {
                    return None;
                }
                found = Some((n + 1, code[..i].chars().count() + 1));
            }
        }
    }
    found
}

/// Evaluates a Jsonnet file to JSON text (minified).
pub(crate) fn evaluate_to_json_text(
    path: &Path,
    ext_strs: &[(String, String)],
) -> Result<String, ConfigLoadError> {
    let absolute: PathBuf = std::path::absolute(path).map_err(|source| ConfigLoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let path_owned = path.to_path_buf();
    let ext_strs = ext_strs.to_vec();
    on_big_stack(path, move || {
        let path = path_owned.as_path();
        let resolver = Resolver {
            files: FileImportResolver::new(Vec::new()),
            main: None,
            fetch: None,
            kinds: RefCell::default(),
        };
        evaluate(
            path,
            &ext_strs,
            resolver,
            |p| std::fs::read_to_string(p).ok(),
            |state| state.import(absolute.as_path()),
        )
    })
}

/// Evaluates Jsonnet `text` named `name` (its URL) to JSON text (minified); its imports are
/// resolved against `name` and read with `fetch` (see [`Resolver`]).
pub(crate) fn evaluate_text_to_json_text(
    name: &str,
    text: &str,
    ext_strs: &[(String, String)],
    fetch: Option<Fetch>,
) -> Result<String, ConfigLoadError> {
    let (name_owned, text, ext_strs) = (name.to_string(), text.to_string(), ext_strs.to_vec());
    on_big_stack(Path::new(name), move || {
        let name = name_owned.as_str();
        let resolver = Resolver {
            files: FileImportResolver::new(Vec::new()),
            main: Some((name.to_string(), text.as_bytes().to_vec())),
            fetch,
            kinds: RefCell::default(),
        };
        let entry = SourcePath::new(Remote(name.to_string()));
        evaluate(
            Path::new(name),
            &ext_strs,
            resolver,
            |_| Some(text.to_string()),
            |state| state.import_resolved(entry),
        )
    })
}

/// Runs `work` (an evaluation of the config at `path`) on a thread with a stack of
/// [`STACK_BYTES`], or of [`FALLBACK_STACK_BYTES`] when the system cannot reserve that, and
/// waits for it, at most the [evaluation limit](set_eval_limit) (see the module
/// documentation).
fn on_big_stack(
    path: &Path,
    work: impl FnOnce() -> Result<String, ConfigLoadError> + Send + 'static,
) -> Result<String, ConfigLoadError> {
    on_stacks(
        &[STACK_BYTES, FALLBACK_STACK_BYTES],
        path,
        eval_limit(),
        work,
    )
}

/// The default [evaluation limit](set_eval_limit). The slowest config in `examples/`
/// evaluates in under a second on the project's 2-vCPU machines (most in tens of
/// milliseconds): this leaves a large library or a slow disk ample room and still answers
/// a config that never ends within a minute.
pub const DEFAULT_EVAL_LIMIT: Duration = Duration::from_secs(60);

static EVAL_LIMIT_MS: AtomicU64 = AtomicU64::new(DEFAULT_EVAL_LIMIT.as_millis() as u64);

/// How long one evaluation may take before it is an error (`--eval-timeout`): the thread
/// evaluating it is left behind (jrsonnet cannot be interrupted), so a command that meets it
/// reports and exits.
pub fn set_eval_limit(limit: Duration) {
    let ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX).max(1);
    EVAL_LIMIT_MS.store(ms, Ordering::Relaxed);
}

fn eval_limit() -> Duration {
    Duration::from_millis(EVAL_LIMIT_MS.load(Ordering::Relaxed))
}

/// Runs `work` on a thread with the first of the stack sizes `sizes` the system gives, and
/// waits for it at most `limit`.
fn on_stacks(
    sizes: &[usize],
    path: &Path,
    limit: Duration,
    work: impl FnOnce() -> Result<String, ConfigLoadError> + Send + 'static,
) -> Result<String, ConfigLoadError> {
    let failed = |why: String| ConfigLoadError::Jsonnet {
        path: path.to_path_buf(),
        trace: why,
    };
    // A failed spawn drops its closure: the work waits in a slot each attempt can take it from.
    let slot = Arc::new(Mutex::new(Some(work)));
    let mut refused = None;
    for &bytes in sizes {
        let (tx, rx) = std::sync::mpsc::channel();
        let slot = slot.clone();
        let spawned = std::thread::Builder::new()
            .name("jsonnet".into())
            .stack_size(bytes)
            .spawn(move || {
                let work = slot.lock().ok().and_then(|mut w| w.take());
                if let Some(work) = work {
                    let _ = tx.send(work());
                }
            });
        match spawned {
            Ok(_) => {
                return match rx.recv_timeout(limit) {
                    Ok(result) => result,
                    Err(RecvTimeoutError::Timeout) => Err(failed(format!(
                        // Duration's own text: `60s`, `300ms`, `1.5s`.
                        "its evaluation did not finish within {limit:?} (--eval-timeout raises the limit)"
                    ))),
                    Err(RecvTimeoutError::Disconnected) => Err(failed(
                        "its evaluation failed unexpectedly (see above)".into(),
                    )),
                };
            }
            Err(e) => refused = Some(e),
        }
    }
    Err(failed(match refused {
        Some(e) => format!("cannot start the thread that evaluates it: {e}"),
        None => "no stack to evaluate it on".into(),
    }))
}

/// Evaluates what `entry` imports from a state with `resolver`, the library and
/// `ext_strs`, to JSON text (minified); errors name `path`.
fn evaluate(
    path: &Path,
    ext_strs: &[(String, String)],
    resolver: Resolver,
    source: impl Fn(&Path) -> Option<String>,
    entry: impl FnOnce(&State) -> jrsonnet_evaluator::Result<Val>,
) -> Result<String, ConfigLoadError> {
    let jsonnet_error = |e: &jrsonnet_evaluator::Error| {
        let mut trace = trace(e);
        if let Some(place) = missing_field_place(e, path, || source(path)) {
            trace.push_str(&place);
        }
        ConfigLoadError::Jsonnet {
            path: path.to_path_buf(),
            trace,
        }
    };

    let ctx = jrsonnet_stdlib::ContextInitializer::new(PathResolver::new_cwd_fallback());
    for (name, value) in ext_strs {
        if name == LIBRARY_EXT_VAR {
            return Err(ConfigLoadError::ReservedExtVar { name: name.clone() });
        }
        ctx.add_ext_str(name.as_str().into(), value.as_str().into());
    }
    ctx.add_native(
        crate::go_numbers::NATIVE_NAME,
        crate::go_numbers::builtin_go_to_string {},
    );

    let mut builder = State::builder();
    builder.import_resolver(resolver);
    // The initializer shares its settings with its clones: the library's value is added
    // after the state exists.
    builder.context_initializer(ctx.clone());
    let state = builder.build();
    // The state is made current for this thread while evaluating; a caller that is itself
    // inside a jrsonnet evaluation keeps its own.
    let _guard = state.try_enter();
    let _depth = jrsonnet_evaluator::stack::limit_stack_depth(MAX_STACK);

    // `std.extVar('sub')` is the same value as `import 'sluice.libsonnet'` (evaluated once,
    // and its errors point into `sluice.libsonnet`).
    let lib = state
        .import_resolved(library_path(LIBRARY_IMPORT_NAMES[0]))
        .map_err(|e| jsonnet_error(&e))?;
    ctx.add_ext_var(LIBRARY_EXT_VAR.into(), lib);

    let val = entry(&state).map_err(|e| jsonnet_error(&e))?;
    val.manifest(JsonFormat::minify())
        .map_err(|e| jsonnet_error(&e))
}

#[cfg(test)]
mod collapse_tests {
    #[test]
    fn repeated_frames_are_shown_once_with_their_count() {
        assert_eq!(
            super::collapse_repeats(
                "msg\n    a:1: f\n    a:1: f\n    a:1: f\n    b:2: g\n    a:1: f"
            ),
            "msg\n    a:1: f (3 times)\n    b:2: g\n    a:1: f"
        );
        assert_eq!(super::collapse_repeats("one"), "one");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deep nesting and deep recursion are errors that name sluice's limit, not aborts,
    /// and never the `--max-stack` option sluice does not have.
    #[test]
    fn depth_limits_are_errors() {
        let nested = format!("{}{}", "[".repeat(1000), "]".repeat(1000));
        let recursive = "local f(n) = [f(n + 1)]; f(0)".to_string();
        let lib_import = format!("local s = import 'sluice.libsonnet'; {nested}");
        for (text, want) in [
            (
                &nested,
                "cfg.jsonnet:1:501: brackets nested more than 500 deep",
            ),
            (&lib_import, "brackets nested more than 500 deep"),
            (&recursive, "evaluation nested deeper than 200 calls"),
        ] {
            let e = evaluate_text_to_json_text("cfg.jsonnet", text, &[], None)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
            assert!(!e.contains("--max-stack"), "{e}");
        }
    }

    /// The deepest evaluations the bounds allow, of each construct that nests the syntax
    /// tree: a body as deep as [`crate::nesting::MAX_DEPTH`] lets it be, alone and then in
    /// every call of a recursion as deep as jrsonnet allows ([`MAX_STACK`]). Each runs on a
    /// stack of `STACK_BYTES / MARGIN`: it ends in a value or jrsonnet's depth error, never
    /// a stack overflow (which would abort this test process).
    #[test]
    fn deepest_evaluation_fits_the_stack() {
        const MARGIN: usize = 2;
        let max = crate::nesting::MAX_DEPTH;
        let config = |body: &str, hole: &str| {
            let body = body.replace("HOLE", hole);
            format!("local f(n) = if n == 0 then 0 else {body};\n{{ x: f(1000000) }}")
        };
        // A body of `unit`s around `HOLE` (where the recursion goes), as deep as the bound
        // allows.
        let deep = |unit: &str, around: &str| {
            let per = crate::nesting::depth(unit).unwrap_or(1).max(1);
            let mut n = max / per;
            loop {
                let body = around.replace("UNITS", &unit.repeat(n));
                match crate::nesting::depth(&config(&body, "f(n - 1)")) {
                    Ok(d) => {
                        assert!(d > max - 2 * per, "{unit}: {d}");
                        return body;
                    }
                    Err(_) => n -= 1,
                }
            }
        };
        let bodies = [
            ("+", deep("+1", "HOLE UNITS")),
            ("unary -", deep("-", "UNITS HOLE")),
            ("!", deep("!", "UNITS (HOLE == 0)")),
            ("local", deep("local x = 1; ", "UNITS HOLE")),
            ("if", deep("if n < 0 then 1 else ", "UNITS HOLE")),
            ("assert", deep("assert true; ", "UNITS HOLE")),
            ("extension", deep(" {}", "{ v: HOLE } UNITS")),
            ("string", deep("+'a'", "std.toString(HOLE) UNITS")),
        ];
        for (name, body) in bodies {
            for (recursion, want) in [
                ("0", None),
                ("f(n - 1)", Some("evaluation nested deeper than 200 calls")),
            ] {
                let text = config(&body, recursion);
                assert!(crate::nesting::check(&text).is_ok(), "{name}");
                let got = on_stacks(
                    &[STACK_BYTES / MARGIN],
                    Path::new("deep.jsonnet"),
                    DEFAULT_EVAL_LIMIT,
                    move || evaluate_text_to_json_text_here("deep.jsonnet", &text),
                );
                match (want, got) {
                    (None, Ok(_)) => {}
                    (Some(want), Err(e)) if e.to_string().contains(want) => {}
                    (_, got) => panic!("{name} {recursion}: {got:?}"),
                }
            }
        }
    }

    /// A stack the system cannot reserve (an exbibyte here; 256 MiB on a small Lambda
    /// function) is no error: the evaluation runs on the next size.
    #[test]
    fn a_stack_the_system_refuses_falls_back() {
        let got = on_stacks(
            &[1 << 60, FALLBACK_STACK_BYTES],
            Path::new("c.jsonnet"),
            DEFAULT_EVAL_LIMIT,
            || evaluate_text_to_json_text_here("c.jsonnet", "{ a: 1 + 1 }"),
        );
        assert_eq!(got.unwrap(), r#"{"a":2}"#);
        let e = on_stacks(
            &[1 << 60],
            Path::new("c.jsonnet"),
            DEFAULT_EVAL_LIMIT,
            || Ok(String::new()),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("c.jsonnet: cannot start the thread that evaluates it: "),
            "{e}"
        );
    }

    /// An evaluation past the limit is an error naming the limit and the flag that raises
    /// it, given within the limit (the thread evaluating it is left behind).
    #[test]
    fn an_evaluation_past_the_limit_is_an_error() {
        let text = "local r = std.range(1, 2000000000); \
                    std.foldl(function(a, b) std.foldl(function(c, d) c + d, r, a), r, 0)"
            .to_string();
        let started = std::time::Instant::now();
        let e = on_stacks(
            &[STACK_BYTES],
            Path::new("loop.jsonnet"),
            Duration::from_millis(300),
            move || evaluate_text_to_json_text_here("loop.jsonnet", &text),
        )
        .unwrap_err()
        .to_string();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            e,
            "loop.jsonnet: its evaluation did not finish within 300ms (--eval-timeout raises the limit)"
        );
    }

    /// [`evaluate_text_to_json_text`] on the calling thread.
    fn evaluate_text_to_json_text_here(name: &str, text: &str) -> Result<String, ConfigLoadError> {
        let resolver = Resolver {
            files: FileImportResolver::new(Vec::new()),
            main: Some((name.to_string(), text.as_bytes().to_vec())),
            fetch: None,
            kinds: RefCell::default(),
        };
        let entry = SourcePath::new(Remote(name.to_string()));
        evaluate(
            Path::new(name),
            &[],
            resolver,
            |_| Some(text.to_string()),
            |state| state.import_resolved(entry),
        )
    }

    /// What `importstr` and `importbin` read is data, never parsed: a word list with more
    /// names than the depth bound is fine. The same file imported as Jsonnet is checked,
    /// whichever import comes first.
    #[test]
    fn only_jsonnet_imports_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let words: String = (0..2000).map(|i| format!("host{i}.example\n")).collect();
        std::fs::write(dir.path().join("words.txt"), &words).unwrap();
        let deep = format!("1{}", "+1".repeat(20_000));
        std::fs::write(dir.path().join("deep.libsonnet"), &deep).unwrap();
        let cases = [
            (
                "local w = importstr 'words.txt'; local b = importbin 'words.txt'; \
                 { n: std.length(w), m: std.length(b) }",
                Ok(format!(r#"{{"m":{0},"n":{0}}}"#, words.len())),
            ),
            ("importstr 'deep.libsonnet'", Ok(format!("{deep:?}"))),
            (
                "import 'deep.libsonnet'",
                Err("deep.libsonnet:1:1202: expression nested"),
            ),
            (
                "local s = importstr 'deep.libsonnet'; local d = import 'deep.libsonnet'; [s, d]",
                Err("deep.libsonnet:1:1202: expression nested"),
            ),
            (
                "local s = importstr 'deep.libsonnet'; local d = import './deep.libsonnet'; \
                 std.length(s) + d",
                Err("deep.libsonnet:1:1202: expression nested"),
            ),
            ("import 'words.txt'", Err("words.txt:")),
        ];
        for (i, (text, want)) in cases.into_iter().enumerate() {
            let config = dir.path().join(format!("c{i}.jsonnet"));
            std::fs::write(&config, text).unwrap();
            let got = evaluate_to_json_text(&config, &[]).map_err(|e| e.to_string());
            match (&want, &got) {
                (Ok(w), Ok(g)) if w == g => {}
                (Err(w), Err(g)) if g.contains(w) => {}
                _ => panic!("{text}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn the_one_place_a_field_is_indexed() {
        let cases = [
            ("a.b.uper(x)", "uper", Some((1, 4))),
            (
                "local s = 1;\n  sub.tf.str.to.uper({})",
                "uper",
                Some((2, 16)),
            ),
            ("x['uper']\n", "uper", Some((1, 2))),
            ("x[\"uper\"]", "uper", Some((1, 2))),
            ("a.uper + b.uper", "uper", None),
            ("a.upper", "uper", None),
            ("// a.uper\nb.uper", "uper", Some((2, 2))),
            ("a.other", "uper", None),
        ];
        for (text, field, want) in cases {
            assert_eq!(unique_index_of(text, field), want, "{text:?}");
        }
    }

    /// A static analysis error names each place, in the file it is in. `{dir}` in a wanted
    /// line stands for the directory of the files.
    #[test]
    fn static_analysis_errors_name_each_place() {
        /// A case's files, the first the config, as (name, text).
        type Files<'a> = &'a [(&'a str, &'a str)];
        let cases: &[(&str, Files, &[&str])] = &[
            (
                "an undefined local",
                &[(
                    "config.jsonnet",
                    "local sub = std.extVar('sub');\n\n{\n  transforms: [\n    sub.tf.obj.cp({ obj: { src: 'a', trg: 'b' } }),\n    undefined_thing,\n  ],\n}\n",
                )],
                &[
                    "static analysis error: undefined local: undefined_thing",
                    "    {dir}/config.jsonnet:6:5-19: undefined local: undefined_thing",
                ],
            ),
            (
                "two undefined locals, in the order of the text",
                &[(
                    "config.jsonnet",
                    "{\n  transforms: [first,\n    second],\n}\n",
                )],
                &[
                    "static analysis errors: undefined local: first; undefined local: second",
                    "    {dir}/config.jsonnet:2:16-20: undefined local: first",
                    "    {dir}/config.jsonnet:3:5-10: undefined local: second",
                ],
            ),
            (
                "in an imported file, named with its own line",
                &[
                    (
                        "config.jsonnet",
                        "local h = import 'helpers.libsonnet';\n{ transforms: [h.t] }\n",
                    ),
                    ("helpers.libsonnet", "{\n  t: missing,\n}\n"),
                ],
                &[
                    "static analysis error: undefined local: missing",
                    "    {dir}/helpers.libsonnet:2:6-12: undefined local: missing",
                    "    {dir}/config.jsonnet:1:11-16: import",
                    "    elem <0> evaluation",
                    "    field <transforms> manifestification",
                ],
            ),
            (
                "a suggestion, and a warning beside the error",
                &[(
                    "config.jsonnet",
                    "local sub = std.extVar('sub');\nlocal unused = 1;\n{ transforms: [subb.tf.send.stdout()] }\n",
                )],
                &[
                    "static analysis error: undefined local: subb",
                    "    {dir}/config.jsonnet:3:16-19: undefined local: subb",
                    "        There is a local with similar name present: sub",
                    "    {dir}/config.jsonnet:1:7-9: warning: unused local: sub",
                    "    {dir}/config.jsonnet:2:7-12: warning: unused local: unused",
                ],
            ),
            (
                "columns count characters, not bytes",
                &[("config.jsonnet", "{ name: 'ünïcödé', transforms: [x] }\n")],
                &[
                    "static analysis error: undefined local: x",
                    "    {dir}/config.jsonnet:1:33: undefined local: x",
                ],
            ),
            (
                "an error with no place",
                &[("config.jsonnet", "{ transforms: [] } + self\n")],
                &[
                    "static analysis error: `self` used outside of object",
                    "    `self` used outside of object",
                ],
            ),
        ];
        for (name, files, want) in cases {
            let dir = tempfile::tempdir().unwrap();
            for (file, text) in *files {
                std::fs::write(dir.path().join(file), text).unwrap();
            }
            let err = evaluate_to_json_text(&dir.path().join(files[0].0), &[]).unwrap_err();
            let ConfigLoadError::Jsonnet { trace, .. } = err else {
                panic!("{name}: {err}");
            };
            // Named as jrsonnet names files: relative to the working directory, unless
            // that climbs to the root (so `{dir}` depends on where the tests run).
            let shown = PathResolver::new_cwd_fallback().resolve(dir.path());
            let want = want.join("\n").replace("{dir}", &shown);
            assert_eq!(trace, want, "{name}");
        }
    }

    #[test]
    fn a_static_analysis_error_in_a_config_given_as_text_names_its_url() {
        let err = evaluate_text_to_json_text(
            "s3://b/cfg.jsonnet",
            "{\n  transforms: [nope],\n}\n",
            &[],
            None,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "s3://b/cfg.jsonnet: static analysis error: undefined local: nope\n    \
             s3://b/cfg.jsonnet:2:16-19: undefined local: nope"
        );
    }

    #[test]
    fn urls_join_like_rfc_3986() {
        for (base, path, want) in [
            (
                "s3://b/dir/cfg.jsonnet",
                "lib.libsonnet",
                Some("s3://b/dir/lib.libsonnet"),
            ),
            (
                "s3://b/dir/cfg.jsonnet",
                "../x.libsonnet",
                Some("s3://b/x.libsonnet"),
            ),
            (
                "s3://b/cfg.jsonnet",
                "sub/x.json",
                Some("s3://b/sub/x.json"),
            ),
            (
                "s3://b/dir/cfg.jsonnet",
                "/top.libsonnet",
                Some("s3://b/top.libsonnet"),
            ),
            (
                "https://h:8443/a/cfg.jsonnet?v=1",
                "lib.libsonnet",
                Some("https://h:8443/a/lib.libsonnet"),
            ),
            (
                "https://h/a/cfg.jsonnet",
                "s3://other/x",
                Some("s3://other/x"),
            ),
            ("config text", "x.libsonnet", None),
            ("mailto:a@b", "x", None),
        ] {
            assert_eq!(join_url(base, path).as_deref(), want, "{base} + {path}");
        }
    }
}
