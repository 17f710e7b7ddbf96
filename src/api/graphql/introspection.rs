//! The schema's introspection result as a file for the playground: GraphiQL builds its docs explorer, completion
//! and checks from it, so the playground shows the schema while the API refuses introspection
//! (`APP_GRAPHQL_INTROSPECTION`, off as the chart installs the service). It tells only the API's shape, as
//! schema.graphql in the repository does.

use async_graphql::{Request, Schema};

use super::{Mutation, Query, Subscription};

/// The query GraphiQL 3 sends: graphql-js's `getIntrospectionQuery({ inputValueDeprecation: true })`.
const INTROSPECTION_QUERY: &str = r#"query IntrospectionQuery {
  __schema {
    queryType { name }
    mutationType { name }
    subscriptionType { name }
    types { ...FullType }
    directives {
      name
      description
      locations
      args(includeDeprecated: true) { ...InputValue }
    }
  }
}
fragment FullType on __Type {
  kind
  name
  description
  fields(includeDeprecated: true) {
    name
    description
    args(includeDeprecated: true) { ...InputValue }
    type { ...TypeRef }
    isDeprecated
    deprecationReason
  }
  inputFields(includeDeprecated: true) { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue {
  name
  description
  type { ...TypeRef }
  defaultValue
  isDeprecated
  deprecationReason
}
fragment TypeRef on __Type {
  kind
  name
  ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType {
    kind name ofType { kind name ofType { kind name ofType { kind name } } }
  } } } } } }
}"#;

/// The answer to GraphiQL's introspection query, `{"data":{"__schema":…}}`, from a schema of its own with
/// introspection on. It needs no data and waits on nothing, so it runs to its end here.
pub fn introspection_json() -> String {
    let schema = Schema::build(Query, Mutation, Subscription).finish();
    let response = futures::executor::block_on(schema.execute(Request::new(INTROSPECTION_QUERY)));
    if !response.errors.is_empty() {
        tracing::warn!(errors = ?response.errors, "the schema's introspection answered errors");
    }
    // A response of values and errors only: serializing it cannot fail.
    serde_json::to_string(&response).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_introspection_file_describes_the_whole_schema_without_errors() {
        let answer: serde_json::Value = serde_json::from_str(&introspection_json()).unwrap();
        assert!(answer.get("errors").is_none(), "{answer:#}");
        let schema = &answer["data"]["__schema"];
        assert_eq!(schema["queryType"]["name"], "Query");
        assert_eq!(schema["subscriptionType"]["name"], "Subscription");
        let query = schema["types"].as_array().unwrap().iter().find(|ty| ty["name"] == "Query").unwrap();
        let fields: Vec<&str> = query["fields"].as_array().unwrap().iter().filter_map(|f| f["name"].as_str()).collect();
        assert!(fields.contains(&"runtimeStatus"), "{fields:?}");
    }
}
