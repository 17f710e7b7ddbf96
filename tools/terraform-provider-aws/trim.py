#!/usr/bin/env python3
"""Trims a copy of the AWS provider's source to the service packages the modules use.

    trim.py PROVIDER_COPY WRAPPER_MODULE SERVICES_FILE

The provider registers 266 service packages and its client factory imports 264 AWS SDK clients; compiling them all
took 28 to 37 minutes on two cores, most of a cold CI run. The tests apply the modules under
resources/terraform/modules only, whose resources live in the few packages SERVICES_FILE lists. This rewrites two
generated files of PROVIDER_COPY (a copy whose files are hard links into the module cache: each is unlinked before
it is written), and leaves every other file as published:
  - internal/provider/sdkv2/service_packages_gen.go registers the listed service packages only;
  - internal/conns/awsclient_gen.go keeps the SDK clients that the packages still compiled call.
A client is made by its own service package at run time, so the package of every client called is registered too
(SERVICES_FILE lists the modules' packages; the others follow).
WRAPPER_MODULE is a module whose go.mod replaces the provider by PROVIDER_COPY (for `go list`). A module that starts
using a resource of another package fails the Terraform tests ("does not support resource type") until the package
is listed. Production images carry the released provider (Dockerfile), never this build.
"""
import os
import re
import subprocess
import sys

PROVIDER_MODULE = "github.com/hashicorp/terraform-provider-aws"
SERVICE_IMPORT = re.compile(r'^\t"' + re.escape(PROVIDER_MODULE) + r'/internal/service/(\w+)"$')
SERVICE_ENTRY = re.compile(r"^\t\t(\w+)\.ServicePackage\(ctx\),$")
CLIENT_METHOD = re.compile(r"^func \(c \*AWSClient\) (\w+)\(ctx context\.Context\)")
IMPORT_LINE = re.compile(r'^\t(?:(\w+) )?"([^"]+)"$')
SERVICE_NAME = re.compile(r'^\t(\w+)\s*=\s*"(\w+)"$', re.MULTILINE)
CLIENT_SERVICE = re.compile(r"\bnames\.(\w+)\b")


def trimmed_service_packages(source: str, services: set[str]) -> str:
    """The registry of service packages with only `services` imported and listed."""
    found, lines = set(), []
    for line in source.splitlines(keepends=True):
        match = SERVICE_IMPORT.match(line.rstrip("\n")) or SERVICE_ENTRY.match(line.rstrip("\n"))
        if match and match.group(1) not in services:
            continue
        if match:
            found.add(match.group(1))
        lines.append(line)
    missing = services - found
    if missing:
        sys.exit(f"trim.py: the provider has no service package {', '.join(sorted(missing))}")
    return "".join(lines)


def compiled_provider_packages(provider_dir: str, wrapper: str) -> list[str]:
    """Source folders of the provider's own packages that its binary compiles."""
    listing = subprocess.run(
        ["go", "list", "-mod=readonly", "-deps", "-f", "{{.Dir}}", PROVIDER_MODULE],
        check=True, capture_output=True, text=True, cwd=wrapper,
    ).stdout.split()
    return [folder for folder in listing if folder.startswith(provider_dir + os.sep)]


def called_client_methods(folders: list[str], methods: list[str]) -> set[str]:
    """The client factory methods that any non-test Go file of `folders` calls."""
    calls = re.compile(r"\.(" + "|".join(map(re.escape, methods)) + r")\(")
    called = set()
    for folder in folders:
        for name in os.listdir(folder):
            if name.endswith(".go") and not name.endswith("_test.go"):
                with open(os.path.join(folder, name), encoding="utf-8") as source:
                    called.update(calls.findall(source.read()))
    return called


def trimmed_client_factory(source: str, keep: set[str]) -> str:
    """The client factory with only the methods in `keep` and the imports those use."""
    head, _, body = source.partition("\nfunc ")
    methods = ["func " + chunk.strip("\n") + "\n" for chunk in ("\nfunc " + body).split("\nfunc ")[1:]]
    kept = "\n".join(method for method in methods if CLIENT_METHOD.match(method).group(1) in keep)
    header = []
    for line in head.splitlines(keepends=True):
        imported = IMPORT_LINE.match(line.rstrip("\n"))
        if imported:
            name = imported.group(1) or imported.group(2).rsplit("/", 1)[-1]
            if not re.search(r"\b" + re.escape(name) + r"\.", kept):
                continue
        header.append(line)
    return "".join(header).rstrip("\n") + "\n\n" + kept


def rewrite(path: str, text: str) -> None:
    """Replaces `path` by a new file, leaving the module cache file it was linked to as it is."""
    os.unlink(path)
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)


def client_services(provider_dir: str, factory_source: str) -> dict[str, str]:
    """The service package that creates each client of the factory (`client` looks the package up at run time)."""
    with open(os.path.join(provider_dir, "names/consts_gen.go"), encoding="utf-8") as source:
        constants = dict(SERVICE_NAME.findall(source.read()))
    owners = {}
    for method in factory_source.split("\nfunc ")[1:]:
        name = CLIENT_METHOD.match("func " + method).group(1)
        owners[name] = constants[CLIENT_SERVICE.search(method).group(1)]
    return owners


def main() -> None:
    provider_dir, wrapper, services_file = (os.path.abspath(arg) for arg in sys.argv[1:4])
    with open(services_file, encoding="utf-8") as listed:
        services = {line.strip() for line in listed if line.strip() and not line.startswith("#")}
    registry = os.path.join(provider_dir, "internal/provider/sdkv2/service_packages_gen.go")
    factory = os.path.join(provider_dir, "internal/conns/awsclient_gen.go")
    with open(registry, encoding="utf-8") as source:
        registry_source = source.read()
    with open(factory, encoding="utf-8") as source:
        factory_source = source.read()
    owners = client_services(provider_dir, factory_source)
    # A client is created by its service package, so the package of every client called is registered too, and
    # its own code may call further clients: repeat until nothing is added.
    while True:
        rewrite(registry, trimmed_service_packages(registry_source, services))
        called = called_client_methods(compiled_provider_packages(provider_dir, wrapper), list(owners))
        needed = services | {owners[method] for method in called}
        if needed == services:
            break
        services = needed
    rewrite(factory, trimmed_client_factory(factory_source, called))
    print(f"trim.py: registered {' '.join(sorted(services))}", file=sys.stderr)


if __name__ == "__main__":
    main()
