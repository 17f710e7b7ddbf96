//! The pages' commands reach the service as the chart installs it: every `port-forward` forwards the chart's ports
//! (`charts/cluster-provisioner/values.yaml`, `ports.http` and `ports.metrics`), and every URL on this machine
//! (`http://127.0.0.1:PORT/PATH`, `localhost` too) names one of those ports and a path the router serves, on the
//! port that serves it (`/metrics` the metrics port, every other path the API's). The paths are read from the
//! router's source (`src/api/mod.rs`), not written here.

use std::path::Path;

use super::path_shape;

#[test]
fn every_port_and_path_of_a_command_is_the_charts_and_the_routers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ports = chart_ports(root);
    let routes = router_paths(root);
    let mut checked = 0;
    let mut wrong = Vec::new();
    for page in super::pages(root) {
        let text = std::fs::read_to_string(&page).unwrap();
        for (number, line) in text.lines().enumerate() {
            let at = format!("{}:{}", page.display(), number + 1);
            for forwarded in port_forwards(line) {
                checked += 1;
                if !forwarded.iter().all(|port| ports.contains(port)) {
                    wrong.push(format!("{at} forwards {forwarded:?}, not the chart's ports {ports:?}: {line}"));
                }
            }
            for (port, path) in loopback_urls(line) {
                checked += 1;
                let shape = path_shape(if path.is_empty() { "/" } else { &path });
                let wanted = if shape == "/metrics" { ports[1] } else { ports[0] };
                if !routes.contains(&shape) {
                    wrong.push(format!("{at} names {path}, which the router does not serve: {line}"));
                } else if port != Some(wanted) {
                    wrong.push(format!("{at} calls {path} on port {port:?}, which the chart serves on {wanted}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "commands that do not reach the installed service:\n{}", wrong.join("\n"));
    assert!(checked >= 5, "the pages forward ports and call the service ({checked} found)");
}

/// The chart's `ports.http` and `ports.metrics`, in that order.
fn chart_ports(root: &Path) -> [u16; 2] {
    let values = std::fs::read_to_string(root.join("charts/cluster-provisioner/values.yaml")).unwrap();
    let values = &yaml_rust2::YamlLoader::load_from_str(&values).unwrap()[0]["ports"];
    let port = |name: &str| u16::try_from(values[name].as_i64().unwrap_or_else(|| panic!("ports.{name}"))).unwrap();
    [port("http"), port("metrics")]
}

/// The ports of each `port-forward` on the line: `LOCAL:REMOTE` both, a lone `PORT` once.
fn port_forwards(line: &str) -> Vec<Vec<u16>> {
    line.split("port-forward ")
        .skip(1)
        .map(|command| {
            command
                .split_whitespace()
                .take_while(|word| !["&", "#", "|", ";", "&&"].contains(word))
                .filter(|word| word.starts_with(|c: char| c.is_ascii_digit()))
                .flat_map(|word| word.split(':').map(|port| port.parse::<u16>().unwrap_or(0)).collect::<Vec<_>>())
                .collect::<Vec<u16>>()
        })
        .filter(|ports| !ports.is_empty())
        .collect()
}

/// The port (if any) and path of every `http(s)://` URL on this machine on the line.
fn loopback_urls(line: &str) -> Vec<(Option<u16>, String)> {
    let mut urls = Vec::new();
    for (start, _) in line.match_indices("://") {
        let rest = &line[start + 3..];
        let end = rest.find(|c: char| c.is_whitespace() || "`\"')>]".contains(c)).unwrap_or(rest.len());
        let url = &rest[..end];
        let (authority, path) = url.split_at(url.find('/').unwrap_or(url.len()));
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port.parse::<u16>().unwrap_or(0))),
            None => (authority, None),
        };
        let scheme_is_http = line[..start].ends_with("http") || line[..start].ends_with("https");
        if scheme_is_http && ["127.0.0.1", "localhost", "[::1]"].contains(&host) {
            urls.push((port, path.to_owned()));
        }
    }
    urls
}

/// Every path the service answers, as a shape (`{}` for a parameter): each `.route(…)` of `src/api/mod.rs`, its
/// path a literal, a constant of `src/api`, `format!` of a constant, or a setting's default (the GraphQL endpoint).
pub(super) fn router_paths(root: &Path) -> Vec<String> {
    let router = std::fs::read_to_string(root.join("src/api/mod.rs")).unwrap();
    let api = super::texts_under(vec![root.join("src/api")]);
    let variables = std::fs::read_to_string(root.join("src/settings/variables.rs")).unwrap();
    let mut paths: Vec<String> = router
        .split(".route(")
        .skip(1)
        .map(|call| {
            let argument = call.trim_start().split(',').next().unwrap_or_default();
            let path = if let Some(literal) = argument.strip_prefix('"') {
                literal.split('"').next().unwrap_or_default().to_owned()
            } else if let Some(formatted) = argument.strip_prefix("&format!(\"{}") {
                let constant = call.split("\", ").nth(1).unwrap_or_default().split(')').next().unwrap_or_default();
                format!("{}{}", constant_value(&api, constant), formatted.trim_end_matches('"').replace("{{", "{"))
            } else if let Some(setting) = argument.strip_prefix("&settings.") {
                setting_default(&variables, setting)
            } else {
                constant_value(&api, argument)
            };
            path_shape(&path)
        })
        .collect();
    paths.sort();
    paths.dedup();
    assert!(paths.len() >= 25 && paths.contains(&"/graphql".to_owned()), "the router's paths: {paths:?}");
    paths
}

/// The value of `const NAME: &str = "…";` in `source`, for `NAME` or `module::NAME`.
fn constant_value(source: &str, path: &str) -> String {
    let name = path.rsplit("::").next().unwrap_or_default().trim();
    let declaration = format!("const {name}: &str = \"");
    let value = source.split(&declaration).nth(1).unwrap_or_else(|| panic!("no constant {name} in src/api"));
    value.split('"').next().unwrap_or_default().to_owned()
}

/// The default of the variable behind an `HttpSettings` field: `api_endpoint` is `app_api_endpoint`,
/// `playground_endpoint` `app_playground_api_endpoint`.
fn setting_default(variables: &str, field: &str) -> String {
    let field = field.trim();
    let variable = ["app_", "app_playground_api_"]
        .iter()
        .map(|prefix| format!("{prefix}{}: \"", field.trim_start_matches("playground_")))
        .find(|start| variables.contains(start.as_str()))
        .unwrap_or_else(|| panic!("no default of the setting {field} in src/settings/variables.rs"));
    variables.split(&variable).nth(1).unwrap().split('"').next().unwrap().to_owned()
}
