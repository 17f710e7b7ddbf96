//! Every GraphQL field the pages name is in `schema.graphql`: each fenced `graphql` block is a document whose
//! fields, arguments, input fields and enum values the schema has, and each quoted `field(arguments)`,
//! `field { sub fields }`, `Type.field` or `field.field` names fields and arguments the schema has.

use std::collections::BTreeMap;
use std::path::Path;

use async_graphql::Value;
use async_graphql::parser::types::{
    BaseType, DocumentOperations, OperationType, Selection, SelectionSet, TypeKind, TypeSystemDefinition,
};
use async_graphql::parser::{parse_query, parse_schema};

#[test]
fn every_graphql_field_the_docs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let schema = Schema::read(&root.join("schema.graphql"));
    let mut blocks = 0;
    for page in super::pages(root) {
        let text = std::fs::read_to_string(&page).unwrap();
        for block in text.split("```graphql\n").skip(1) {
            let document = block.split("```").next().unwrap_or_default();
            if let Err(missing) = schema.check_document(document) {
                panic!("{} has a GraphQL block naming {missing}, which schema.graphql has not", page.display());
            }
            blocks += 1;
        }
    }
    let mut named = 0;
    let mut unknown = Vec::new();
    for (page, word) in super::quoted(root) {
        let Some(reference) = Reference::parse(&word) else { continue };
        match schema.check_reference(&reference) {
            Some(Ok(())) => named += 1,
            Some(Err(missing)) => unknown.push(format!("{} names `{word}`: {missing}", page.display())),
            None => {}
        }
    }
    assert!(unknown.is_empty(), "names that schema.graphql has not:\n{}", unknown.join("\n"));
    assert!(blocks >= 1 && named >= 20, "the pages name GraphQL fields ({blocks} blocks, {named} names found)");
}

/// A field as `schema.graphql` declares it: its arguments with their types, and its type.
struct FieldShape {
    arguments: BTreeMap<String, String>,
    type_name: String,
}

/// What a page can name of the schema: output types' fields, input types' fields, enum values, the root types.
struct Schema {
    outputs: BTreeMap<String, BTreeMap<String, FieldShape>>,
    inputs: BTreeMap<String, BTreeMap<String, String>>,
    enums: BTreeMap<String, Vec<String>>,
    roots: [String; 3],
}

impl Schema {
    fn read(path: &Path) -> Self {
        let document = parse_schema(std::fs::read_to_string(path).unwrap()).unwrap();
        let mut schema = Schema {
            outputs: BTreeMap::new(),
            inputs: BTreeMap::new(),
            enums: BTreeMap::new(),
            roots: ["Query".into(), "Mutation".into(), "Subscription".into()],
        };
        for definition in document.definitions {
            match definition {
                TypeSystemDefinition::Schema(roots) => {
                    let roots = roots.node;
                    for (slot, name) in [roots.query, roots.mutation, roots.subscription].into_iter().enumerate() {
                        if let Some(name) = name {
                            schema.roots[slot] = name.node.to_string();
                        }
                    }
                }
                TypeSystemDefinition::Type(definition) => schema.add(definition.node),
                TypeSystemDefinition::Directive(_) => {}
            }
        }
        schema
    }

    fn add(&mut self, definition: async_graphql::parser::types::TypeDefinition) {
        let name = definition.name.node.to_string();
        let fields = match definition.kind {
            TypeKind::Object(object) => object.fields,
            TypeKind::Interface(interface) => interface.fields,
            TypeKind::InputObject(input) => {
                let fields = input.fields.into_iter().map(|field| {
                    let field = field.node;
                    (field.name.node.to_string(), named(&field.ty.node.base))
                });
                self.inputs.insert(name, fields.collect());
                return;
            }
            TypeKind::Enum(values) => {
                let values = values.values.into_iter().map(|value| value.node.value.node.to_string());
                self.enums.insert(name, values.collect());
                return;
            }
            TypeKind::Scalar | TypeKind::Union(_) => return,
        };
        let fields = fields.into_iter().map(|field| {
            let field = field.node;
            let arguments = field
                .arguments
                .into_iter()
                .map(|argument| (argument.node.name.node.to_string(), named(&argument.node.ty.node.base)))
                .collect();
            (field.name.node.to_string(), FieldShape { arguments, type_name: named(&field.ty.node.base) })
        });
        self.outputs.insert(name, fields.collect());
    }

    /// A whole document: `Err` names the first field, argument or value that the schema has not.
    fn check_document(&self, text: &str) -> Result<(), String> {
        let document = parse_query(text).map_err(|error| format!("no parsable document ({error})"))?;
        let operations: Vec<_> = match &document.operations {
            DocumentOperations::Single(operation) => vec![operation],
            DocumentOperations::Multiple(operations) => operations.values().collect(),
        };
        for operation in operations {
            let root = match operation.node.ty {
                OperationType::Query => &self.roots[0],
                OperationType::Mutation => &self.roots[1],
                OperationType::Subscription => &self.roots[2],
            };
            self.check_selection(root, &operation.node.selection_set.node)?;
        }
        for fragment in document.fragments.values() {
            let on = fragment.node.type_condition.node.on.node.to_string();
            self.check_selection(&on, &fragment.node.selection_set.node)?;
        }
        Ok(())
    }

    fn check_selection(&self, type_name: &str, selection: &SelectionSet) -> Result<(), String> {
        for item in &selection.items {
            match &item.node {
                Selection::Field(field) => {
                    let field = &field.node;
                    let name = field.name.node.as_str();
                    if name == "__typename" {
                        continue;
                    }
                    let shape = self.field(type_name, name)?;
                    for (argument, value) in &field.arguments {
                        let argument_type = shape.arguments.get(argument.node.as_str()).ok_or_else(|| {
                            format!("the argument {argument} of {type_name}.{name}", argument = argument.node)
                        })?;
                        self.check_value(argument_type, &value.node.clone().into_const().unwrap_or_default())?;
                    }
                    self.check_selection(&shape.type_name, &field.selection_set.node)?;
                }
                Selection::InlineFragment(fragment) => {
                    let on = fragment.node.type_condition.as_ref().map(|condition| condition.node.on.node.to_string());
                    self.check_selection(on.as_deref().unwrap_or(type_name), &fragment.node.selection_set.node)?;
                }
                Selection::FragmentSpread(_) => {}
            }
        }
        Ok(())
    }

    /// An argument's value: the fields of an input object and the values of an enum must be the schema's.
    fn check_value(&self, type_name: &str, value: &Value) -> Result<(), String> {
        match value {
            Value::Object(fields) => {
                let Some(input) = self.inputs.get(type_name) else { return Ok(()) };
                for (name, value) in fields {
                    let field_type =
                        input.get(name.as_str()).ok_or_else(|| format!("the input field {type_name}.{name}"))?;
                    self.check_value(field_type, value)?;
                }
                Ok(())
            }
            Value::List(items) => items.iter().try_for_each(|item| self.check_value(type_name, item)),
            Value::Enum(name) => match self.enums.get(type_name) {
                Some(values) if !values.iter().any(|value| value == name.as_str()) => {
                    Err(format!("the value {name} of {type_name}"))
                }
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn field(&self, type_name: &str, name: &str) -> Result<&FieldShape, String> {
        self.outputs.get(type_name).and_then(|fields| fields.get(name)).ok_or_else(|| format!("{type_name}.{name}"))
    }

    /// `None` when the reference is no name of the schema's at all (a chart value, a file, a Rust function);
    /// `Some(Err)` when it starts as one but goes on with what the schema has not.
    fn check_reference(&self, reference: &Reference) -> Option<Result<(), String>> {
        if reference.root.starts_with(|c: char| c.is_ascii_uppercase()) {
            let (field, path) = reference.path.split_first()?;
            if let Some(fields) = self.outputs.get(&reference.root) {
                let shape = fields.get(field.as_str());
                return Some(match shape {
                    Some(shape) => self.check_path(&shape.type_name, path),
                    None => Err(format!("{}.{field}", reference.root)),
                });
            }
            let input = self.inputs.get(&reference.root)?;
            return Some(input.get(field.as_str()).map(|_| ()).ok_or_else(|| format!("{}.{field}", reference.root)));
        }
        // `a.b` starts at a query (`runtimeStatus.runtimeConfiguration`) or an input field (`controlPlane.count`):
        // REST's JSON members (`error.code`) are spelled the same way.
        let candidates: Vec<&FieldShape> = if reference.path.is_empty() {
            self.outputs.values().filter_map(|fields| fields.get(&reference.root)).collect()
        } else {
            self.outputs.get(&self.roots[0]).and_then(|fields| fields.get(&reference.root)).into_iter().collect()
        };
        let input_field = self.inputs.values().find_map(|fields| fields.get(&reference.root));
        if candidates.is_empty() {
            return match input_field {
                Some(type_name) if reference.arguments.is_empty() && reference.selection.is_none() => {
                    Some(self.check_path(type_name, &reference.path))
                }
                // A camelCase call is GraphQL's spelling, not Rust's or a chart's: it must be the schema's.
                _ if reference.is_call() && reference.root.contains(|c: char| c.is_ascii_uppercase()) => {
                    Some(Err(reference.root.clone()))
                }
                _ => None,
            };
        }
        let mut first_error = None;
        for shape in candidates {
            match self.check_field(shape, reference) {
                Ok(()) => return Some(Ok(())),
                Err(missing) => first_error = first_error.or(Some(missing)),
            }
        }
        first_error.map(Err)
    }

    fn check_field(&self, shape: &FieldShape, reference: &Reference) -> Result<(), String> {
        if let Some(argument) = reference.arguments.iter().find(|argument| !shape.arguments.contains_key(*argument)) {
            return Err(format!("the argument {argument} of {}", reference.root));
        }
        if let Some(selection) = &reference.selection {
            let document = parse_query(selection).map_err(|error| format!("no parsable selection ({error})"))?;
            if let DocumentOperations::Single(operation) = &document.operations {
                self.check_selection(&shape.type_name, &operation.node.selection_set.node)?;
            }
        }
        self.check_path(&shape.type_name, &reference.path)
    }

    /// `a.b.c` from a type: each segment a field (of an output or an input type) of the one before.
    fn check_path(&self, type_name: &str, path: &[String]) -> Result<(), String> {
        let Some((segment, rest)) = path.split_first() else { return Ok(()) };
        if let Some(shape) = self.outputs.get(type_name).and_then(|fields| fields.get(segment)) {
            return self.check_path(&shape.type_name, rest);
        }
        match self.inputs.get(type_name).and_then(|fields| fields.get(segment)) {
            Some(field_type) => self.check_path(field_type, rest),
            None => Err(format!("{type_name}.{segment}")),
        }
    }
}

/// The innermost named type of a field's type (`[String!]!` is `String`).
fn named(base: &BaseType) -> String {
    match base {
        BaseType::Named(name) => name.to_string(),
        BaseType::List(item) => named(&item.base),
    }
}

/// How the names of files (`aws.rs`) and hosts (`runtimes.provisioner.kubeopera.io`) end: no field's path.
const FILE_AND_HOST_ENDINGS: [&str; 17] = [
    "rs", "md", "yaml", "yml", "json", "toml", "sh", "sql", "js", "html", "graphql", "tf", "txt", "db", "io", "com",
    "local",
];

/// A quoted name that may be the schema's: `root(arguments) { selection }`, `root { selection }` or `root.path`.
#[derive(Debug)]
struct Reference {
    root: String,
    path: Vec<String>,
    arguments: Vec<String>,
    selection: Option<String>,
}

impl Reference {
    fn parse(word: &str) -> Option<Self> {
        let word = word.trim();
        let end = word.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(word.len());
        let (root, rest) = word.split_at(end);
        if root.is_empty() || !root.starts_with(|c: char| c.is_ascii_alphabetic()) || rest.is_empty() {
            return None;
        }
        let mut reference =
            Reference { root: root.to_owned(), path: Vec::new(), arguments: Vec::new(), selection: None };
        if let Some(path) = rest.strip_prefix('.') {
            let segments: Vec<&str> = path.split('.').collect();
            let is_name = |segment: &&str| {
                segment.starts_with(|c: char| c.is_ascii_lowercase())
                    && segment.chars().all(|c| c.is_ascii_alphanumeric())
            };
            let is_file_or_host = segments.last().is_some_and(|last| FILE_AND_HOST_ENDINGS.contains(last));
            if !segments.iter().all(is_name) || is_file_or_host {
                return None;
            }
            reference.path = segments.into_iter().map(str::to_owned).collect();
            return Some(reference);
        }
        let mut rest = rest;
        if let Some(arguments) = rest.strip_prefix('(') {
            let (arguments, after) = arguments.split_once(')')?;
            reference.arguments = arguments
                .split(',')
                .map(|argument| argument.split(':').next().unwrap_or_default().trim().to_owned())
                .filter(|argument| !argument.is_empty())
                .collect();
            if !reference.arguments.iter().all(|argument| argument.chars().all(|c| c.is_ascii_alphanumeric())) {
                return None;
            }
            rest = after;
        }
        let rest = rest.trim_start();
        if rest.starts_with('{') && rest.ends_with('}') {
            reference.selection = Some(rest.to_owned());
        } else if !rest.is_empty() {
            return None;
        }
        Some(reference)
    }

    fn is_call(&self) -> bool {
        !self.arguments.is_empty() || self.selection.is_some()
    }
}
