// The GraphQL playground: GraphiQL on the service's own endpoint (src/api/playground.rs serves this page and its
// files). Queries and mutations go over HTTP, subscriptions over graphql-transport-ws at the same path; both carry
// the headers of GraphiQL's Headers tab, so a bearer token goes there: {"Authorization": "Bearer <token>"}. A
// subscription sends them as its connection_init payload, where the service reads the token. GraphiQL's own
// introspection query (its docs explorer and completion) is answered from the schema's introspection result, a file
// beside this script: the API may refuse introspection (APP_GRAPHQL_INTROSPECTION, off as the chart installs it).
(function () {
  "use strict";
  const config = JSON.parse(document.getElementById("page-config").textContent);
  const endpoint = new URL(config.endpoint, window.location.href);
  const introspection = new URL(config.introspection, window.location.href);
  const socketEndpoint = new URL(endpoint);
  socketEndpoint.protocol = endpoint.protocol === "https:" ? "wss:" : "ws:";

  // One connection per set of headers: new headers (another token) open a new connection.
  let socket = null;
  function socketClient(headers) {
    const key = JSON.stringify(headers);
    if (socket === null || socket.key !== key) {
      if (socket !== null) socket.client.dispose();
      const client = graphqlWs.createClient({ url: socketEndpoint.href, connectionParams: headers, lazy: true, retryAttempts: 0 });
      socket = { key, client };
    }
    return socket.client;
  }

  function isSubscription(documentAST, operationName) {
    const operations = ((documentAST && documentAST.definitions) || []).filter((d) => d.kind === "OperationDefinition");
    const chosen = operationName ? operations.find((d) => d.name && d.name.value === operationName) : operations[0];
    return Boolean(chosen) && chosen.operation === "subscription";
  }

  // The query GraphiQL sends for the schema (operation IntrospectionQuery, as graphql-js names it).
  function isIntrospection(params) {
    return params.operationName === "IntrospectionQuery" && /^\s*query IntrospectionQuery\b/.test(params.query || "");
  }

  // graphql-ws reports a refused connection as its close event, and GraphQL errors as a list.
  function asError(failure) {
    if (failure instanceof Error) return failure;
    if (Array.isArray(failure)) return new Error(failure.map((error) => error.message).join("; "));
    if (failure && typeof failure.code === "number") {
      return new Error(`the subscription's connection closed (${failure.code}${failure.reason ? ": " + failure.reason : ""})`);
    }
    return new Error(String(failure));
  }

  function fetcher(params, options) {
    const headers = (options && options.headers) || {};
    if (isSubscription(options && options.documentAST, params.operationName)) {
      return {
        subscribe(observer) {
          const unsubscribe = socketClient(headers).subscribe(params, {
            next: (result) => observer.next(result),
            error: (failure) => observer.error(asError(failure)),
            complete: () => observer.complete(),
          });
          return { unsubscribe };
        },
      };
    }
    if (isIntrospection(params)) {
      return fetch(introspection, { headers: { Accept: "application/json" }, credentials: "omit" }).then((response) =>
        response.ok ? response.json() : response.text().then((text) => ({ errors: [{ message: text }] })),
      );
    }
    return fetch(endpoint, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json", ...headers },
      body: JSON.stringify(params),
      credentials: "omit",
    }).then((response) => response.json());
  }

  const defaultQuery = `# The cluster provisioner's GraphQL API. With authentication on,
# put your token into the Headers tab below.
query Runtimes {
  runtimes(first: 10) {
    nodes { id name state }
  }
}
`;
  ReactDOM.createRoot(document.getElementById("graphiql")).render(
    React.createElement(GraphiQL, { fetcher, defaultQuery, defaultHeaders: '{"Authorization": "Bearer "}', shouldPersistHeaders: false }),
  );
})();
