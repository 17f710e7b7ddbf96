//! The changes an approved plan makes, by value. A vanilla control plane is upgraded one part at a time, each
//! part planned alone and awaited, so its approved run cannot apply the saved plan file (Terraform calls it stale
//! once the first part is applied): it applies a new plan only when each change of it is one the approved plan
//! makes, with the same actions and every value the approved plan knew. Counts and addresses are not enough: the
//! same resources changed to other values (new modules, a data source read anew) were never approved.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// One managed resource's change: its actions and what it becomes, with the parts unknown until applied.
#[derive(Debug, Clone, PartialEq)]
struct ResourceChange {
    actions: Vec<String>,
    after: Value,
    after_unknown: Value,
}

/// Every managed resource a plan changes (no-ops and reads left out), by address.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct PlanChanges(BTreeMap<String, ResourceChange>);

impl PlanChanges {
    /// From a saved plan's `show -json`.
    pub(crate) fn of(show_json: &[u8]) -> Result<Self, String> {
        let plan: Value = serde_json::from_slice(show_json).map_err(|error| format!("not a JSON plan: {error}"))?;
        let mut changes = BTreeMap::new();
        for resource in plan["resource_changes"].as_array().into_iter().flatten() {
            if resource["mode"] != "managed" {
                continue;
            }
            let address = resource["address"].as_str().ok_or("a resource change without an address")?;
            let change = &resource["change"];
            let actions: Vec<String> = change["actions"]
                .as_array()
                .ok_or_else(|| format!("{address}: a change without actions"))?
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            if matches!(actions.as_slice(), [only] if only == "no-op" || only == "read") {
                continue;
            }
            let (after, after_unknown) = (change["after"].clone(), change["after_unknown"].clone());
            changes.insert(address.to_owned(), ResourceChange { actions, after, after_unknown });
        }
        Ok(PlanChanges(changes))
    }

    /// `Ok` when `plan` makes exactly these changes: the same resources, each as [`Self::admits`] says.
    pub(crate) fn same_as(&self, plan: &PlanChanges) -> Result<(), String> {
        match self.0.keys().find(|address| !plan.0.contains_key(*address)) {
            Some(address) => Err(format!("{address} is no longer changed")),
            None => self.admits(plan),
        }
    }

    /// `Ok` when every change of `plan` is one of these: the same actions, and each value the approved plan knew
    /// unchanged (what it could not know until applied may now be known). The error names the resource and the
    /// attribute, never a value: values may be secrets.
    pub(crate) fn admits(&self, plan: &PlanChanges) -> Result<(), String> {
        for (address, change) in &plan.0 {
            let Some(approved) = self.0.get(address) else {
                return Err(format!("{address} is changed too ({})", change.actions.join(", ")));
            };
            if change.actions != approved.actions {
                let (now, then) = (change.actions.join(", "), approved.actions.join(", "));
                return Err(format!("{address} is planned as {now}, approved as {then}"));
            }
            if let Some(attribute) = first_difference(&approved.after, &approved.after_unknown, &change.after, "") {
                return Err(format!("{address} gets another value for {attribute}"));
            }
        }
        Ok(())
    }
}

/// The first attribute path where `now` differs from `approved`, skipping what `unknown` (`after_unknown`) marks
/// as unknown when approved.
fn first_difference(approved: &Value, unknown: &Value, now: &Value, path: &str) -> Option<String> {
    if *unknown == Value::Bool(true) {
        return None;
    }
    let at = |key: &str| if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") };
    match (approved, now) {
        (Value::Object(approved), Value::Object(now)) => {
            let keys: BTreeSet<&String> = approved.keys().chain(now.keys()).collect();
            keys.into_iter().find_map(|key| {
                let (then, unknown, now) = (field(approved.get(key)), field(unknown.get(key)), field(now.get(key)));
                first_difference(then, unknown, now, &at(key))
            })
        }
        (Value::Array(approved), Value::Array(now)) if approved.len() == now.len() => {
            approved.iter().zip(now).enumerate().find_map(|(index, (then, now))| {
                first_difference(then, field(unknown.get(index)), now, &format!("{path}[{index}]"))
            })
        }
        (approved, now) if approved == now => None,
        _ => Some(if path.is_empty() { "the resource as a whole".to_owned() } else { path.to_owned() }),
    }
}

/// An absent attribute reads as null, as `show -json` writes an attribute with no value.
fn field(value: Option<&Value>) -> &Value {
    value.unwrap_or(&Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan(changes: &[(&str, &[&str], Value, Value)]) -> PlanChanges {
        let resource_changes: Vec<Value> = changes
            .iter()
            .map(|(address, actions, after, after_unknown)| {
                json!({
                    "address": address, "mode": "managed",
                    "change": { "actions": actions, "after": after, "after_unknown": after_unknown },
                })
            })
            .collect();
        let show = json!({ "resource_changes": resource_changes, "format_version": "1.2" });
        PlanChanges::of(show.to_string().as_bytes()).unwrap()
    }

    const REPLACE: &[&str] = &["delete", "create"];

    fn workers(version: &str) -> (&'static str, &'static [&'static str], Value, Value) {
        ("terraform_data.workers", REPLACE, json!({ "triggers_replace": version, "id": null }), json!({ "id": true }))
    }

    #[test]
    fn the_same_resources_changed_to_other_values_are_not_the_approved_plan() {
        let approved = plan(&[workers("1.35")]);
        assert_eq!(approved.same_as(&plan(&[workers("1.35")])), Ok(()));
        assert_eq!(
            approved.same_as(&plan(&[workers("1.36")])),
            Err("terraform_data.workers gets another value for triggers_replace".to_owned())
        );
        // The summary's view (counts, actions and addresses) cannot tell these plans apart.
        let summary = |version: &str| {
            let show = json!({ "resource_changes": [{
                "address": "terraform_data.workers", "mode": "managed",
                "change": { "actions": REPLACE, "after": { "triggers_replace": version } },
            }] });
            runner_contract::assess::summarize(show.to_string().as_bytes(), &[]).unwrap()
        };
        assert_eq!(summary("1.35"), summary("1.36"));
    }

    #[test]
    fn a_part_planned_alone_is_admitted_and_may_know_what_was_unknown() {
        let machine = |id: Value, unknown: Value| {
            ("terraform_data.machine[0]", REPLACE, json!({ "triggers_replace": "m6i.xlarge", "id": id }), unknown)
        };
        let approved = plan(&[machine(Value::Null, json!({ "id": true })), workers("1.35")]);
        assert_eq!(approved.admits(&plan(&[machine(Value::Null, json!({ "id": true }))])), Ok(()));
        assert_eq!(approved.admits(&plan(&[machine(json!("i-123"), json!({}))])), Ok(()));
        assert!(approved.same_as(&plan(&[workers("1.35")])).unwrap_err().contains("machine[0] is no longer changed"));
    }

    #[test]
    fn another_resource_or_another_action_is_refused_naming_it() {
        let approved = plan(&[workers("1.35")]);
        let update = ("terraform_data.workers", &["update"][..], json!({ "triggers_replace": "1.35" }), json!({}));
        assert_eq!(
            approved.admits(&plan(&[update])),
            Err("terraform_data.workers is planned as update, approved as delete, create".to_owned())
        );
        let other = ("terraform_data.other", &["create"][..], json!({}), json!({}));
        assert_eq!(
            approved.admits(&plan(&[workers("1.35"), other])),
            Err("terraform_data.other is changed too (create)".to_owned())
        );
    }

    #[test]
    fn nested_values_are_compared_to_their_leaves_and_named_by_their_path() {
        let tags = |name: &str| {
            ("aws_instance.node", &["update"][..], json!({ "tags": { "Name": name }, "ports": [1, 2] }), json!({}))
        };
        assert_eq!(
            plan(&[tags("a")]).admits(&plan(&[tags("b")])),
            Err("aws_instance.node gets another value for tags.Name".to_owned())
        );
        let ports =
            ("aws_instance.node", &["update"][..], json!({ "tags": { "Name": "a" }, "ports": [1, 3] }), json!({}));
        assert_eq!(
            plan(&[tags("a")]).admits(&plan(&[ports])),
            Err("aws_instance.node gets another value for ports[1]".to_owned())
        );
        let no_op = ("terraform_data.same", &["no-op"][..], json!({}), json!({}));
        assert_eq!(plan(&[tags("a")]).same_as(&plan(&[tags("a"), no_op])), Ok(()), "a no-op is no change");
    }
}
