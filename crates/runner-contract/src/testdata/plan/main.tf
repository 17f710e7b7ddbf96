# The configuration behind plan.json (see `plan::tests`): applied with `-var generation=one`, then planned with
# `-var generation=two`, it keeps one resource, changes one in place, replaces one, destroys one and adds one.
variable "generation" {
  type = string
}

resource "terraform_data" "kept" {
  input = "unchanged"
}

resource "terraform_data" "changed" {
  input = var.generation
}

resource "terraform_data" "replaced" {
  triggers_replace = var.generation
}

resource "terraform_data" "destroyed" {
  count = var.generation == "one" ? 1 : 0
}

resource "terraform_data" "added" {
  count = var.generation == "two" ? 1 : 0
}
