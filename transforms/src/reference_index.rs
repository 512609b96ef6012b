//! `docs/reference/README.md`'s index of the types is rendered from the registered
//! descriptors (the transforms', the conditions' and the kv stores'), between
//! `<!-- generated: ... -->` markers (the prose around them is written by hand). The test
//! fails when the file differs from what the descriptors give, and rewrites it when
//! `SLUICE_BLESS=1` is set. Each type's link goes to its section on its family's page (a kv
//! store's: on `kv_stores.md`), which must exist.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sluice_engine::TypeInfo;

use crate::registry;

/// The command that rewrites the index.
const BLESS: &str = "SLUICE_BLESS=1 cargo test -p sluice-transforms --lib reference_index";

fn reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reference")
}

/// A Markdown page's anchors with the type names each is the section of: its headings'
/// (as GitHub makes them; `## a, b` is the section of both) and its explicit
/// `<a id="name"></a>` (a type described in a table row).
fn headings(page: &str) -> Vec<(String, Vec<String>)> {
    let explicit = page.split("<a id=\"").skip(1).filter_map(|rest| {
        let (id, _) = rest.split_once("\"></a>")?;
        Some((id.to_string(), vec![id.to_string()]))
    });
    page.lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            let title = l.trim_start_matches('#').trim();
            let anchor = title
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                    _ => None,
                })
                .collect();
            let names = title.split(", ").map(|n| n.trim_matches('`').to_string());
            (anchor, names.collect())
        })
        .chain(explicit)
        .collect()
}

/// The link (relative to `docs/reference/`) to `info`'s section: on its family's page in
/// `dir`, or on another page of the family there (`send_aws.md` if the family's is split).
fn section_link(dir: &str, info: &TypeInfo) -> Result<String, String> {
    let family = info.family();
    let mut pages: Vec<String> = std::fs::read_dir(reference_dir().join(dir))
        .map_err(|e| format!("docs/reference/{dir}: {e}"))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| f.starts_with(family) && f.ends_with(".md"))
        .collect();
    pages.sort_by_key(|p| (*p != format!("{family}.md"), p.clone()));
    for page in &pages {
        let text = std::fs::read_to_string(reference_dir().join(dir).join(page))
            .map_err(|e| format!("docs/reference/{dir}/{page}: {e}"))?;
        if let Some((anchor, _)) = headings(&text)
            .into_iter()
            .find(|(_, names)| names.iter().any(|n| n == info.name))
        {
            return Ok(format!("{dir}/{page}#{anchor}"));
        }
    }
    Err(format!(
        "{} has no section (a heading `## {}`) on docs/reference/{dir}/{family}.md",
        info.name, info.name
    ))
}

/// The index of `infos` (a transform's or a condition's, their pages in `dir`).
fn render(dir: &str, infos: impl Iterator<Item = &'static TypeInfo>) -> Result<String, String> {
    let mut families: BTreeMap<&str, Vec<&TypeInfo>> = BTreeMap::new();
    for info in infos {
        families.entry(info.family()).or_default().push(info);
    }
    let mut out = String::new();
    for (family, infos) in families {
        out.push_str(&format!(
            "\n### {family} ([{family}.md]({dir}/{family}.md))\n\n\
             | type | library function | summary |\n|---|---|---|\n"
        ));
        for info in infos {
            let link = section_link(dir, info)?;
            let aliases = match info.aliases {
                [] => String::new(),
                [one] => format!(" (alias `{one}`)"),
                many => format!(
                    " (aliases {})",
                    many.iter()
                        .map(|a| format!("`{a}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            let library = if info.library.is_empty() {
                "none".to_string()
            } else {
                format!("`{}`", info.library)
            };
            out.push_str(&format!(
                "| [`{name}`]({link}){aliases} | {library} | {summary} |\n",
                name = info.name,
                summary = info.summary,
            ));
        }
    }
    Ok(out)
}

/// The table of the kv stores, each linked to its section of `kv_stores.md`.
fn render_kv_stores() -> Result<String, String> {
    let page = std::fs::read_to_string(reference_dir().join("kv_stores.md"))
        .map_err(|e| format!("docs/reference/kv_stores.md: {e}"))?;
    let sections = headings(&page);
    let mut out = String::from(
        "\n| type | library function | items | locks | summary |\n|---|---|---|---|---|\n",
    );
    for store in crate::kv_store::stores::infos() {
        let name = store.info.name;
        let (anchor, _) = sections
            .iter()
            .find(|(_, names)| names.iter().any(|n| n == name))
            .ok_or_else(|| {
                format!(
                    "{name} has no section (a heading `## {name}`) on docs/reference/kv_stores.md"
                )
            })?;
        let items = match (store.items.is_some(), store.read_only) {
            (false, _) => "no",
            (true, true) => "read-only",
            (true, false) => "yes",
        };
        let locks = if store.locks.is_some() { "yes" } else { "no" };
        out.push_str(&format!(
            "| [`{name}`](kv_stores.md#{anchor}) | `{library}` | {items} | {locks} | {summary} |\n",
            library = store.info.library,
            summary = store.info.summary,
        ));
    }
    Ok(out)
}

/// Where the generated part for `what` is in `text`: its start marker's end and its end
/// marker's start.
fn markers(text: &str, what: &str) -> Result<(usize, usize), String> {
    let start = format!("<!-- generated: {what} (from the types' descriptors: {BLESS}) -->\n");
    let end = format!("<!-- end of generated: {what} -->");
    match (text.find(&start), text.find(&end)) {
        (Some(i), Some(j)) if i + start.len() <= j => Ok((i + start.len(), j)),
        _ => Err(format!(
            "docs/reference/README.md has no markers for the {what} (or they are out of \
             order): {start:?} and {end:?}"
        )),
    }
}

/// The README as the descriptors give it, from its current text.
fn rendered(text: &str) -> Result<String, String> {
    let r = registry();
    let (t0, t1) = markers(text, "transforms")?;
    let (c0, c1) = markers(text, "conditions")?;
    let (k0, k1) = markers(text, "kv stores")?;
    if t1 > c0 || c1 > k0 {
        return Err(
            "docs/reference/README.md: the parts must come in order: transforms, conditions, \
             kv stores"
                .into(),
        );
    }
    Ok(format!(
        "{}{}\n{}{}\n{}{}\n{}",
        &text[..t0],
        render("transforms", r.transform_infos())?,
        &text[t1..c0],
        render("conditions", r.condition_infos())?,
        &text[c1..k0],
        render_kv_stores()?,
        &text[k1..]
    ))
}

#[test]
fn reference_index_is_current() {
    let path = reference_dir().join("README.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let want = rendered(&text).unwrap_or_else(|e| panic!("{e}"));
    if std::env::var_os("SLUICE_BLESS").is_some_and(|v| v == "1") {
        if want != text {
            std::fs::write(&path, &want).unwrap();
        }
        return;
    }
    if want != text {
        let first = want
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| want.lines().count().min(text.lines().count()));
        panic!(
            "docs/reference/README.md is stale: run `{BLESS}` (the first line that differs, \
             {}:\n  in the file: {:?}\n  rendered:    {:?})",
            first + 1,
            text.lines().nth(first).unwrap_or(""),
            want.lines().nth(first).unwrap_or(""),
        );
    }
}

#[test]
fn headings_have_github_s_anchors_and_name_their_types() {
    let h = headings(
        "# string transforms\n## string_append\ntext\n## string_to_lower, string_to_upper\n\
         | <a id=\"string_x\"></a>`string_x` | |",
    );
    let anchors: Vec<&str> = h.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(
        anchors,
        [
            "string-transforms",
            "string_append",
            "string_to_lower-string_to_upper",
            "string_x"
        ]
    );
    assert_eq!(h[2].1, ["string_to_lower", "string_to_upper"]);
}

#[test]
fn a_type_without_a_section_is_named() {
    const NOWHERE: TypeInfo = TypeInfo::named("string_nowhere");
    let e = section_link("transforms", &NOWHERE).unwrap_err();
    assert!(
        e.contains("string_nowhere has no section") && e.contains("transforms/string.md"),
        "{e}"
    );
}

#[test]
fn the_markers_must_be_there() {
    let e = rendered("# no markers\n").unwrap_err();
    assert!(e.contains("has no markers for the transforms"), "{e}");
    assert_eq!(
        section_link("transforms", &crate::string::append::INFO).as_deref(),
        Ok("transforms/string.md#string_append")
    );
}
