//! The documentation a user reads: README.md, the book's pages (docs/src) and CONTRIBUTING.md
//! and RELEASING.md, for the tests that hold what they say to the code and the manifests.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn markdown_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            markdown_under(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// Every documentation file, README.md first, then the others in path order.
pub(crate) fn files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    markdown_under(&repo().join("docs/src"), &mut files);
    files.push(repo().join("CONTRIBUTING.md"));
    files.push(repo().join("RELEASING.md"));
    files.sort();
    files.insert(0, repo().join("README.md"));
    files
}

/// One page of the book, by its path under docs/src.
pub(crate) fn page(path: &str) -> String {
    let file = repo().join("docs/src").join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// Each documentation file with its text and its path from the repository's root.
pub(crate) fn texts() -> Vec<(String, String)> {
    files()
        .into_iter()
        .map(|f| {
            let text =
                std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let shown = f.strip_prefix(repo()).unwrap_or(&f).display().to_string();
            (shown, text)
        })
        .collect()
}

/// A recipe of a book page: the fenced block on the line right after `<!-- recipe: NAME -->`,
/// as the page shows it, for a test to apply exactly so.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Recipe {
    pub name: String,
    /// The fence's info string: `yaml`, `sh`.
    pub lang: String,
    /// The block's lines, each ending in a newline.
    pub body: String,
}

/// Every recipe of a page, in page order. A marker not followed at once by a fence, or a
/// fence never closed, is the page's mistake: it panics, naming the recipe.
pub(crate) fn recipes(page: &str) -> Vec<Recipe> {
    let mut recipes = Vec::new();
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line
            .strip_prefix("<!-- recipe: ")
            .and_then(|rest| rest.strip_suffix(" -->"))
        else {
            continue;
        };
        let lang = lines
            .next()
            .and_then(|fence| fence.strip_prefix("```"))
            .filter(|lang| !lang.is_empty() && !lang.contains('`'))
            .unwrap_or_else(|| {
                panic!("recipe {name}: its marker must be followed at once by a fence with a language (```yaml, ```sh)")
            });
        let mut body = String::new();
        let mut closed = false;
        for line in lines.by_ref() {
            if line == "```" {
                closed = true;
                break;
            }
            body.push_str(line);
            body.push('\n');
        }
        assert!(closed, "recipe {name}: its block is never closed");
        recipes.push(Recipe {
            name: name.to_owned(),
            lang: lang.to_owned(),
            body,
        });
    }
    recipes
}
