// The REST reference: Swagger UI on the service's OpenAPI document (src/api/playground.rs serves this page and its
// files). The document and every "Try it out" call need the caller's bearer token, like the API itself: the form
// above the reference takes it, keeps it in this page only, and loads the reference again with it.
(function () {
  "use strict";
  const config = JSON.parse(document.getElementById("page-config").textContent);
  let token = "";

  function show() {
    const ui = SwaggerUIBundle({
      url: config.openapi,
      dom_id: "#swagger-ui",
      // The default asks validator.swagger.io about the document.
      validatorUrl: null,
      deepLinking: false,
      tryItOutEnabled: false,
      requestInterceptor: (request) => {
        if (token) request.headers.Authorization = `Bearer ${token}`;
        return request;
      },
      onComplete: () => {
        if (token) ui.preauthorizeApiKey("bearer", token);
      },
    });
  }

  document.getElementById("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    token = document.getElementById("token").value.trim();
    show();
  });
  show();
})();
