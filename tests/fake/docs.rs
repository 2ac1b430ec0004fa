//! The book's recipes (`<!-- recipe: NAME -->` before a fenced block) read as a test reads
//! them, and the Fleets page's in the shape its real-tier test applies.

use serde_json::Value;

use crate::common::docs::{self, Recipe};
use crate::common::manifests::documents;

/// The Fleets page's recipes, by name.
fn fleets() -> Vec<Recipe> {
    docs::recipes(&docs::page("fleets.md"))
}

fn recipe<'a>(recipes: &'a [Recipe], name: &str) -> &'a Recipe {
    recipes
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("docs/src/fleets.md: no recipe {name}"))
}

fn yaml(recipe: &Recipe) -> Value {
    assert_eq!(recipe.lang, "yaml", "{}: a YAML block", recipe.name);
    let mut docs = documents(&recipe.body);
    assert_eq!(docs.len(), 1, "{}: one document", recipe.name);
    docs.remove(0)
}

#[test]
fn a_recipe_is_the_block_right_after_its_marker_as_written() {
    let page = "# A page\n\n<!-- recipe: one -->\n```yaml\na: 1\n\n  b: [2]\n```\n\nText.\n\n\
                ```sh\nnot a recipe\n```\n<!-- recipe: two -->\n```sh\necho \"$x\" \\\n  y\n```\n";
    assert_eq!(
        docs::recipes(page),
        [
            Recipe {
                name: "one".into(),
                lang: "yaml".into(),
                body: "a: 1\n\n  b: [2]\n".into(),
            },
            Recipe {
                name: "two".into(),
                lang: "sh".into(),
                body: "echo \"$x\" \\\n  y\n".into(),
            },
        ]
    );
}

#[test]
#[should_panic(expected = "recipe lost: its marker must be followed at once by a fence")]
fn a_marker_with_a_blank_line_before_its_block_is_refused() {
    docs::recipes("<!-- recipe: lost -->\n\n```sh\ntrue\n```\n");
}

#[test]
#[should_panic(expected = "recipe open: its block is never closed")]
fn a_recipe_whose_block_is_never_closed_is_refused() {
    docs::recipes("<!-- recipe: open -->\n```sh\ntrue\n");
}

#[test]
fn the_fleets_page_shows_each_recipe_once_in_the_shape_its_test_applies() {
    let recipes = fleets();
    let names: Vec<&str> = recipes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "spoke-kustomization",
            "spoke-helm",
            "hub-capi",
            "hub-token",
            "argocd-cluster-secret",
            "hub-argocd",
        ],
        "tests/real applies each of these by name: keep the names, or change both"
    );

    let kustomization = yaml(recipe(&recipes, "spoke-kustomization"));
    assert_eq!(kustomization["kind"], "Kustomization");
    assert_eq!(
        kustomization["resources"],
        serde_json::json!(["../ecr-refresh/manifests/spoke"]),
        "the spoke overlay beside the clone, as the kustomize page's install overlay"
    );

    let helm = recipe(&recipes, "spoke-helm");
    assert_eq!(helm.lang, "sh");
    assert!(
        helm.body
            .starts_with("helm install ecr-refresh charts/ecr-refresh ")
            && helm.body.contains("--set spoke.enabled=true"),
        "spoke-helm: {}",
        helm.body
    );

    for (name, source, namespaces) in [
        (
            "hub-capi",
            "capi",
            serde_json::json!(["fleet-a", "fleet-b"]),
        ),
        (
            "hub-argocd",
            "argocd",
            serde_json::json!(["ecr-refresh-clusters"]),
        ),
    ] {
        let values = yaml(recipe(&recipes, name));
        assert_eq!(values["clusters"]["source"], source, "{name}");
        assert_eq!(values["clusters"]["namespaces"], namespaces, "{name}");
    }

    let token = recipe(&recipes, "hub-token");
    assert_eq!(token.lang, "sh");
    assert!(
        token
            .body
            .contains("kubectl create token ecr-refresh-hub --namespace ecr-refresh"),
        "hub-token mints a token of the narrowed ServiceAccount: {}",
        token.body
    );
    for variable in ["token=", "server=", "ca="] {
        assert!(
            token.body.lines().any(|l| l.starts_with(variable)),
            "hub-token sets {variable}"
        );
    }

    // The Secret the hub reads, in the namespace hub-argocd names, with what hub-token set.
    let secret = recipe(&recipes, "argocd-cluster-secret");
    assert_eq!(secret.lang, "sh");
    let manifest = secret
        .body
        .split_once("<<EOF\n")
        .and_then(|(_, rest)| rest.split_once("EOF\n"))
        .map(|(manifest, _)| manifest)
        .expect("argocd-cluster-secret: a manifest in a heredoc");
    let secret = documents(manifest).remove(0);
    assert_eq!(secret["metadata"]["namespace"], "ecr-refresh-clusters");
    assert_eq!(
        secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"],
        "cluster"
    );
    assert_eq!(secret["stringData"]["server"], "$server");
    let config: Value = serde_json::from_str(
        secret["stringData"]["config"]
            .as_str()
            .expect("config: a string"),
    )
    .expect("config: JSON");
    assert_eq!(config["bearerToken"], "$token");
    assert_eq!(config["tlsClientConfig"]["caData"], "$ca");
}
