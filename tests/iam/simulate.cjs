// Evaluates requests against IAM identity policies with @cloud-copilot/iam-simulate, for
// tests/integration/modules.rs (the node roles' policies as tofu renders them).
//
// Input, from the environment: IAM_TOOLS_DIR (the folder with node_modules, from tools/iam-test-tools.sh). On stdin, a JSON array of requests, each
// {"policies": [policy documents as JSON text], "action": "ec2:CreateTags", "resource": "<ARN>",
// "context": {"aws:TagKeys": [...], ...}}. On stdout, a JSON array in the same order, each {"result": "Allowed" |
// "ExplicitlyDenied" | "ImplicitlyDenied", "ignoredContextKeys": [...]}, or {"error": "..."} where the simulator
// refused the input (an unknown action, a resource the action does not take, a policy that does not validate).
"use strict";

const { createRequire } = require("node:module");
const path = require("node:path");

// Resolved from the installation's folder, which honours the package's "exports" (a require of its path would not).
const { runSimulation } = createRequire(path.join(process.env.IAM_TOOLS_DIR, "package.json"))(
  "@cloud-copilot/iam-simulate",
);

const ACCOUNT = "123456789012";

async function evaluate(request) {
  const simulation = {
    identityPolicies: request.policies.map((policy, index) => ({ name: `policy-${index}`, policy: JSON.parse(policy) })),
    serviceControlPolicies: [],
    resourceControlPolicies: [],
    request: {
      principal: `arn:aws:iam::${ACCOUNT}:role/node`,
      action: request.action,
      resource: { resource: request.resource, accountId: ACCOUNT },
      contextVariables: request.context,
    },
  };
  const response = await runSimulation(simulation, {});
  if (response.resultType === "error") return { error: JSON.stringify(response.errors) };
  if (response.resultType !== "single") return { error: `a ${response.resultType} result for a single resource` };
  return { result: response.overallResult, ignoredContextKeys: response.result.ignoredContextKeys ?? [] };
}

async function main() {
  let input = "";
  for await (const chunk of process.stdin) input += chunk;
  const results = [];
  for (const request of JSON.parse(input)) results.push(await evaluate(request));
  process.stdout.write(JSON.stringify(results));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
