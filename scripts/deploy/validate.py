"""Offline validation of Corkboard's deployment artefacts.

Run through `scripts/validate-deploy`, which provides the virtualenv with the
pinned tools of scripts/deploy/requirements.txt. No cluster, no docker engine
and no `helm` binary are needed: the chart is linted and rendered by Helm's
own Go code through helm-python-sdk (libhelm_c), manifests are checked with
kubernetes-validate's bundled Kubernetes 1.32 schemas, the kustomize base is
built with `kubectl kustomize` when kubectl exists.

Subcommands:
  validate          run every check, print `deploy validation: N passed, M failed`
  write-k8s-base    regenerate deploy/k8s/ from the chart (the base is generated
                    so it cannot drift from the chart; `validate` checks it is
                    up to date)
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import tomllib
import traceback
import urllib.parse
from pathlib import Path
from typing import Any, Callable

import helm_python as helm
import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate.version import __version__ as KUBERNETES_VALIDATE_VERSION

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "corkboard"
K8S_BASE = ROOT / "deploy" / "k8s"
DEPLOY_DIR = Path(__file__).resolve().parent
OUT = ROOT / "target" / "deploy-validate"
YAMLLINT_CONFIG = DEPLOY_DIR / ".yamllint"
KUBE_VERSION = "1.32.0"

# The release the generated kustomize base corresponds to.
BASE_RELEASE = "corkboard"
BASE_NAMESPACE = "corkboard"

# Configuration keys of the `corkboard` binary (the contract the lead builds).
CONFIG_KEYS = {
    "listen", "store", "mongodb_uri", "mongodb_database", "registry", "redis_url",
    "redis_key_prefix", "jwt_algorithm", "jwt_secret_file", "jwt_public_key_file",
    "jwt_issuer", "jwt_audience", "session_key_file", "otlp_endpoint", "log_format",
    "public_url", "gateway_mode", "gateway_listen", "gateway_public_url",
    "allowed_hosts", "rate_limit_per_second", "rate_limit_burst", "data_dir",
    # Keys the binary has beyond the brief's contract (services/config settings).
    "jwt_private_key_file", "gateway_bind", "gateway_advertise", "allowed_origins",
    "max_body_bytes", "store_timeout_ms",
    # Issue 32: the upstream key, previous-key slots, datastore TLS, metrics port.
    "upstream_key_file", "jwt_previous_key_files", "session_previous_key_files",
    "upstream_previous_key_files", "redis_tls_ca_file", "redis_tls_cert_file",
    "redis_tls_key_file", "mongodb_tls_ca_file", "metrics_listen",
}
# Paths the default Ingress and HTTPRoute may expose (the web board, its
# assets and sign-in, /v1, /mcp); never /metrics, /readyz, /healthz.
PUBLIC_PATHS = {("/", "Exact"), ("/assets", "Prefix"), ("/signin", "Exact"), ("/web", "Prefix"),
                ("/v1", "Prefix"), ("/mcp", "Exact")}
METRICS_PORT = 4893
# Keys that must never be in a ConfigMap: they arrive through Secrets.
SECRET_CONFIG_KEYS = {"mongodb_uri", "redis_url"}

# Dummy secrets for Secrets the chart does not create (existingSecret): the
# passwords are distinctive so a leak into --check-config output is caught.
DUMMY_MONGODB_URI = "mongodb://corkboard:dummy-mongo-pw-5e1f9c@mongo.invalid:27017/"
DUMMY_REDIS_URL = "redis://:dummy-redis-pw-7a2d4b@redis.invalid:6379/"
# With Redis TLS files configured the binary accepts only rediss:// URLs.
DUMMY_REDISS_URL = "rediss://:dummy-redis-pw-7a2d4b@redis.invalid:6379/"
FIXTURES = DEPLOY_DIR / "fixtures"


# --------------------------------------------------------------------------
# Reporting


class Report:
    """Counts checks; every check is a named pass or fail with a reason."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed: list[str] = []
        self.skipped: list[str] = []

    def check(self, name: str, fn: Callable[[], str | None]) -> Any:
        try:
            detail = fn()
        except CheckFailed as exc:
            self.failed.append(name)
            print(f"FAIL  {name}\n{indent(str(exc))}", flush=True)
            return None
        except Exception:  # a crash in a check is a failure of that check, not of the run
            self.failed.append(name)
            print(f"FAIL  {name} (crashed)\n{indent(traceback.format_exc())}", flush=True)
            return None
        self.passed += 1
        print(f"ok    {name}" + (f"  ({detail})" if detail else ""), flush=True)
        return detail

    def skip(self, name: str, why: str) -> None:
        self.skipped.append(name)
        bar = "!" * 78
        print(f"{bar}\nSKIP  {name}\n{indent(why)}\n{bar}", flush=True)


class CheckFailed(Exception):
    pass


def indent(text: str, prefix: str = "      ") -> str:
    return "\n".join(prefix + line for line in text.rstrip().splitlines())


def require(cond: bool, message: str) -> None:
    if not cond:
        raise CheckFailed(message)


def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 300), **kw)


def venv_tool(name: str) -> str:
    """A console script of the running virtualenv (PATH may not include it)."""
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


# --------------------------------------------------------------------------
# Manifests


def split_docs(text: str) -> list[str]:
    """Split a YAML stream like Helm does, dropping empty documents."""
    docs = []
    for chunk in re.split(r"(?m)^---[ \t]*(?:#.*)?$", text):
        body = chunk.strip("\n")
        meaningful = [ln for ln in body.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        if meaningful:
            docs.append(body.strip() + "\n")
    return docs


def helm_stream(rendered: dict[str, str]) -> tuple[str, list[dict[str, Any]], str]:
    """`helm template`-like output, the parsed objects and NOTES.txt."""
    parts, objs, notes = [], [], ""
    for path in sorted(rendered):
        if path.endswith("NOTES.txt"):
            notes = rendered[path]
            continue
        for doc in split_docs(rendered[path]):
            parts.append(f"---\n# Source: {path}\n{doc}")
            obj = yaml.safe_load(doc)
            if obj is not None:
                objs.append(obj)
    return "".join(parts), objs, notes


def render_chart(values: dict[str, Any], release: str, namespace: str) -> dict[str, str]:
    with helm.Chart.load(str(CHART)) as chart:
        return chart.render(values, name=release, namespace=namespace, is_install=True)


def load_values(path: Path) -> dict[str, Any]:
    return helm.values_from_yaml(path.read_text()) or {}


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o.get("kind") == kind]


def name_of(obj: dict[str, Any]) -> str:
    return f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"


def secret_values(obj: dict[str, Any]) -> dict[str, str]:
    out = {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}
    out.update(obj.get("stringData") or {})
    return out


def labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def config_toml_of(objs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (name_of(cm), cm["data"]["config.toml"])
        for cm in by_kind(objs, "ConfigMap")
        if "config.toml" in (cm.get("data") or {})
    ]


# --------------------------------------------------------------------------
# Checks on a set of rendered objects


SERVICEMONITOR_SCHEMA = json.loads((DEPLOY_DIR / "schemas" / "servicemonitor-monitoring.coreos.com-v1.json").read_text())
# Kinds whose CRDs kubernetes-validate does not know: checked for shape here.
CRD_KINDS = {"PodMonitor": "monitoring.coreos.com/v1", "HTTPRoute": "gateway.networking.k8s.io/v1"}


def check_schemas(objs: list[dict[str, Any]]) -> str:
    errors, crds = [], 0
    for obj in objs:
        try:
            if obj.get("kind") == "ServiceMonitor":
                # kubernetes-validate has no CRD schemas; this is a local subset schema.
                jsonschema.Draft7Validator(SERVICEMONITOR_SCHEMA).validate(obj)
                crds += 1
            elif obj.get("kind") in CRD_KINDS:
                # No schema at hand: the API version and the fields the chart relies on.
                want = CRD_KINDS[obj["kind"]]
                if obj.get("apiVersion") != want:
                    errors.append(f"{name_of(obj)}: apiVersion {obj.get('apiVersion')} != {want}")
                spec = obj.get("spec") or {}
                key = "podMetricsEndpoints" if obj["kind"] == "PodMonitor" else "rules"
                if not spec.get(key):
                    errors.append(f"{name_of(obj)}: spec.{key} is empty")
                crds += 1
            else:
                kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError as exc:
            errors.append(f"{name_of(obj)}: {exc.message}")
        except jsonschema.ValidationError as exc:
            path = ".".join(str(p) for p in exc.absolute_path)
            errors.append(f"{name_of(obj)}: {path}: {exc.message}")
    require(not errors, "\n".join(errors))
    note = f"{len(objs)} objects, Kubernetes {KUBE_VERSION} strict"
    if crds:
        note += f"; {crds} custom resources checked locally"
    return note


def yamllint_file(path: Path) -> str | None:
    proc = run([venv_tool("yamllint"), "--strict", "-c", str(YAMLLINT_CONFIG), str(path)])
    require(proc.returncode == 0, proc.stdout + proc.stderr)
    return None


def pod_spec(dep: dict[str, Any]) -> dict[str, Any]:
    return dep["spec"]["template"]["spec"]


def check_invariants(objs: list[dict[str, Any]], external_secrets: set[str]) -> str:
    """Cross-object consistency and the security contract of the brief."""
    problems: list[str] = []
    deps = by_kind(objs, "Deployment")
    services = by_kind(objs, "Service")
    secrets_rendered = {o["metadata"]["name"] for o in by_kind(objs, "Secret")}
    configmaps = {o["metadata"]["name"] for o in by_kind(objs, "ConfigMap")}
    known_secrets = secrets_rendered | external_secrets
    roles = set()

    for dep in deps:
        n = name_of(dep)
        spec = pod_spec(dep)
        psc = spec.get("securityContext", {})
        if spec.get("automountServiceAccountToken") is not False:
            problems.append(f"{n}: automountServiceAccountToken must be false")
        if psc.get("runAsNonRoot") is not True or psc.get("runAsUser") != 10001:
            problems.append(f"{n}: pod must run as non-root uid 10001")
        if psc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            problems.append(f"{n}: pod seccompProfile must be RuntimeDefault")
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in spec["containers"]:
            cn = f"{n} container {c['name']}"
            sc = c.get("securityContext", {})
            expect = {
                "readOnlyRootFilesystem": True,
                "allowPrivilegeEscalation": False,
                "runAsNonRoot": True,
            }
            for key, want in expect.items():
                if sc.get(key) is not want:
                    problems.append(f"{cn}: securityContext.{key} must be {want}")
            if sc.get("capabilities", {}).get("drop") != ["ALL"]:
                problems.append(f"{cn}: capabilities must drop ALL")
            if sc.get("seccompProfile", {}).get("type", "RuntimeDefault") != "RuntimeDefault":
                problems.append(f"{cn}: seccompProfile must be RuntimeDefault")
            args = c.get("args", [])
            if not args or args[0] not in ("server", "runner") or "--config" not in args:
                problems.append(f"{cn}: args must be <role> --config FILE, got {args}")
                continue
            role = args[0]
            roles.add(role)
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            want_ports = {"http": 4891, "metrics": METRICS_PORT} | ({"gateway": 4892} if role == "runner" else {})
            if ports != want_ports:
                problems.append(f"{cn}: ports {ports} != {want_ports}")
            probes = [("startupProbe", "/healthz"), ("readinessProbe", "/readyz")]
            if role == "server":
                probes.append(("livenessProbe", "/healthz"))
            elif c.get("livenessProbe", {}).get("tcpSocket", {}).get("port") != "gateway":
                problems.append(f"{cn}: the runner's livenessProbe must open the gateway port")
            for probe, path in probes:
                got = c.get(probe, {}).get("httpGet", {})
                if got.get("path") != path or got.get("port") != "http":
                    problems.append(f"{cn}: {probe} must be GET {path} on port http, got {got}")
            readiness = c.get("readinessProbe", {})
            # /readyz answers within 1.5 s (health.rs CHECK_TIMEOUT).
            if readiness.get("timeoutSeconds", 1) < 2:
                problems.append(f"{cn}: readinessProbe timeoutSeconds must be at least 2 (/readyz takes up to 1.5 s)")
            env_values = {e["name"]: e.get("value") for e in c.get("env", [])}
            grace = spec.get("terminationGracePeriodSeconds", 30)
            pre_stop = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
            want_grace = str((grace - pre_stop) * 1000)
            if env_values.get("CORKBOARD_SHUTDOWN_GRACE_MS") != want_grace:
                problems.append(f"{cn}: CORKBOARD_SHUTDOWN_GRACE_MS must be (grace {grace} - preStop {pre_stop}) s = {want_grace} ms, got {env_values.get('CORKBOARD_SHUTDOWN_GRACE_MS')}")
            elif int(want_grace) < 10000:
                problems.append(f"{cn}: preStop {pre_stop} s leaves {int(want_grace) // 1000} s of the {grace} s grace period: the drains need 10")
            if not c.get("resources", {}).get("requests") or not c.get("resources", {}).get("limits"):
                problems.append(f"{cn}: resources need requests and limits")
            mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
            tmp = mounts.get("/tmp")
            if not tmp or "emptyDir" not in volumes.get(tmp["name"], {}):
                problems.append(f"{cn}: /tmp must be an emptyDir mount")
            config_path = args[args.index("--config") + 1]
            if config_path not in mounts:
                problems.append(f"{cn}: --config {config_path} is not a mounted file")
            for m in mounts.values():
                if m["mountPath"] != "/tmp" and not m.get("readOnly"):
                    problems.append(f"{cn}: mount {m['mountPath']} must be readOnly")
            for env in c.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref and ref["name"] not in known_secrets:
                    problems.append(f"{cn}: env {env['name']} references unknown Secret {ref['name']}")
                if env["name"] in ("CORKBOARD_MONGODB_URI", "CORKBOARD_REDIS_URL") and not ref:
                    problems.append(f"{cn}: {env['name']} must come from a Secret")
        for v in volumes.values():
            if "secret" in v and v["secret"]["secretName"] not in known_secrets:
                problems.append(f"{n}: volume {v['name']} references unknown Secret {v['secret']['secretName']}")
            if "configMap" in v and v["configMap"]["name"] not in configmaps:
                problems.append(f"{n}: volume {v['name']} references unknown ConfigMap {v['configMap']['name']}")

    if roles != {"server", "runner"}:
        problems.append(f"expected a server and a runner Deployment, found roles {sorted(roles)}")

    def deployments_selected(selector: dict[str, str]) -> list[dict[str, Any]]:
        return [d for d in deps if labels_match(selector, d["spec"]["template"]["metadata"]["labels"])]

    svc_ports: dict[str, set[str]] = {}
    for svc in services:
        n = name_of(svc)
        targets = deployments_selected(svc["spec"]["selector"])
        if len(targets) != 1:
            problems.append(f"{n}: selector matches {len(targets)} Deployments, expected 1")
            continue
        cports = {p["name"] for c in pod_spec(targets[0])["containers"] for p in c.get("ports", [])}
        for p in svc["spec"]["ports"]:
            if isinstance(p.get("targetPort"), str) and p["targetPort"] not in cports:
                problems.append(f"{n}: targetPort {p['targetPort']} is not a container port")
        svc_ports[svc["metadata"]["name"]] = {p["name"] for p in svc["spec"]["ports"]}
    if not any(ports == {"gateway"} for ports in svc_ports.values()):
        problems.append("no Service exposes only the runner gateway port")
    for name, ports in svc_ports.items():
        if "gateway" in ports and "metrics" in ports:
            problems.append(f"Service/{name}: the gateway Service must not expose metrics")

    for kind in ("PodDisruptionBudget",):
        for obj in by_kind(objs, kind):
            if len(deployments_selected(obj["spec"]["selector"]["matchLabels"])) != 1:
                problems.append(f"{name_of(obj)}: selector must match exactly one Deployment")
            if obj["spec"].get("unhealthyPodEvictionPolicy") != "AlwaysAllow":
                problems.append(f"{name_of(obj)}: unhealthyPodEvictionPolicy must be AlwaysAllow (a datastore outage must not block node drains)")
    for hpa in by_kind(objs, "HorizontalPodAutoscaler"):
        target = [d for d in deps if d["metadata"]["name"] == hpa["spec"]["scaleTargetRef"]["name"]]
        if not target:
            problems.append(f"{name_of(hpa)}: scale target not found")
        elif "replicas" in target[0]["spec"]:
            problems.append(f"{name_of(hpa)}: {name_of(target[0])} must not pin replicas under an HPA")
    for ing in by_kind(objs, "Ingress"):
        for rule in ing["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                be = path["backend"]["service"]
                if "http" not in svc_ports.get(be["name"], set()) or be["port"].get("name") != "http":
                    problems.append(f"{name_of(ing)}: backend {be} is not the server's http port")
                if (path["path"], path["pathType"]) not in PUBLIC_PATHS:
                    problems.append(f"{name_of(ing)}: path {path['path']} ({path['pathType']}) is not one of the public paths {sorted(PUBLIC_PATHS)}")
    for route in by_kind(objs, "HTTPRoute"):
        for rule in route["spec"]["rules"]:
            for match in rule.get("matches", []):
                p = match.get("path", {})
                public = {(path, "PathPrefix" if kind == "Prefix" else kind) for path, kind in PUBLIC_PATHS} | {("/runs", "PathPrefix")}
                if (p.get("value"), p.get("type")) not in public:
                    problems.append(f"{name_of(route)}: path {p} is not public")
            for be in rule.get("backendRefs", []):
                if be["name"] not in svc_ports:
                    problems.append(f"{name_of(route)}: backend {be['name']} is not a Service of the release")
    for sm in by_kind(objs, "ServiceMonitor"):
        sel = sm["spec"]["selector"].get("matchLabels", {})
        hits = [s for s in services if labels_match(sel, s["metadata"].get("labels", {})) and "metrics" in svc_ports.get(s["metadata"]["name"], set())]
        if len(hits) < 2:
            problems.append(f"{name_of(sm)}: selects {len(hits)} Services with a metrics port, expected server and runner")
        if any(ep.get("port") != "metrics" for ep in sm["spec"]["endpoints"]):
            problems.append(f"{name_of(sm)}: must scrape the metrics port")
    for hpa in by_kind(objs, "HorizontalPodAutoscaler"):
        if "behavior" not in hpa["spec"]:
            problems.append(f"{name_of(hpa)}: no scaling behavior (a lull would drop pods holding connections at once)")
    problems += check_network_policies(objs, deps)
    for pod in by_kind(objs, "Pod"):
        if pod["metadata"].get("annotations", {}).get("helm.sh/hook") != "test":
            problems.append(f"{name_of(pod)}: bare Pod that is not a helm test hook")
    require(not problems, "\n".join(problems))
    return f"{len(deps)} Deployments, {len(services)} Services"


def check_network_policies(objs: list[dict[str, Any]], deps: list[dict[str, Any]]) -> list[str]:
    """Sandboxes may reach only the runner gateway port; no rule allows everyone."""
    problems = []
    policies = by_kind(objs, "NetworkPolicy")
    runner_labels = [d["spec"]["template"]["metadata"]["labels"] for d in deps if pod_spec(d)["containers"][0]["args"][0] == "runner"]
    sandbox_peers: list[Any] = []
    for np_ in policies:
        sel = np_["spec"]["podSelector"].get("matchLabels", {})
        if not any(labels_match(sel, d["spec"]["template"]["metadata"]["labels"]) for d in deps):
            continue  # a policy for other pods (the optional sandbox egress policy)
        for rule in np_["spec"].get("ingress", []):
            if not rule.get("from"):
                problems.append(f"{name_of(np_)}: an ingress rule without peers allows every source")
            ports = {p.get("port") for p in rule.get("ports", [])}
            if "gateway" in ports:
                if ports != {"gateway"}:
                    problems.append(f"{name_of(np_)}: the gateway rule must open only the gateway port")
                if not any(labels_match(sel, rl) for rl in runner_labels):
                    problems.append(f"{name_of(np_)}: gateway rule on a non-runner policy")
                sandbox_peers.extend(rule.get("from", []))
    if policies:
        if not sandbox_peers:
            problems.append("no NetworkPolicy rule lets sandboxes reach the runner gateway")
        for np_ in policies:
            for rule in np_["spec"].get("ingress", []):
                ports = {p.get("port") for p in rule.get("ports", [])}
                if "gateway" not in ports and any(peer in sandbox_peers for peer in rule.get("from", [])):
                    problems.append(f"{name_of(np_)}: sandbox peers may reach ports {sorted(ports)}")
                if "gateway" in ports:
                    continue
                # A sandbox pod in the release namespace must not match a
                # same-namespace peer of any other port (admin API, /v1/runs).
                for sandbox in sandbox_peers:
                    labels = (sandbox.get("podSelector") or {}).get("matchLabels") or {}
                    ns_sel = sandbox.get("namespaceSelector", None)
                    in_release_ns = "namespaceSelector" not in sandbox or ns_sel == {}
                    for peer in rule.get("from", []):
                        if in_release_ns and "namespaceSelector" not in peer and "ipBlock" not in peer \
                                and selector_matches(peer.get("podSelector") or {}, labels):
                            problems.append(f"{name_of(np_)}: a sandbox pod ({labels}) in the release namespace may reach ports {sorted(ports)} through {peer}")
            for rule in np_["spec"].get("egress", []):
                if not rule.get("to"):
                    problems.append(f"{name_of(np_)}: egress rule on ports {[p.get('port') for p in rule.get('ports', [])]} has no peers: it allows every address")
            if "metrics" in {p.get("port") for r in np_["spec"].get("ingress", []) for p in r.get("ports", [])}:
                for r in np_["spec"]["ingress"]:
                    ports = {p.get("port") for p in r.get("ports", [])}
                    if "metrics" in ports and any(peer in sandbox_peers for peer in r.get("from", [])):
                        problems.append(f"{name_of(np_)}: sandboxes may scrape metrics")
    return problems


def selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a LabelSelector selects a pod with `labels`."""
    if not labels_match(selector.get("matchLabels") or {}, labels):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def check_config_files(objs: list[dict[str, Any]]) -> str:
    """config.toml parses, uses only known keys, carries no secrets, points into mounts."""
    problems = []
    cfgs = config_toml_of(objs)
    require(len(cfgs) == 1, f"expected one ConfigMap with config.toml, found {len(cfgs)}")
    name, text = cfgs[0]
    try:
        cfg = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CheckFailed(f"{name}: config.toml is not TOML: {exc}") from exc
    unknown = set(cfg) - CONFIG_KEYS
    if unknown:
        problems.append(f"{name}: unknown keys {sorted(unknown)}")
    leaked = set(cfg) & SECRET_CONFIG_KEYS
    if leaked:
        problems.append(f"{name}: secret keys {sorted(leaked)} must come from Secrets, not the ConfigMap")
    for key in ("listen", "gateway_listen", "metrics_listen"):
        if not str(cfg.get(key, "")).startswith("0.0.0.0:"):
            problems.append(f"{name}: {key} must listen on all interfaces in a cluster")
    if cfg.get("gateway_mode") != "shared":
        problems.append(f"{name}: gateway_mode must be shared in Kubernetes")
    mounts = set()
    for dep in by_kind(objs, "Deployment"):
        for c in pod_spec(dep)["containers"]:
            mounts |= {m["mountPath"] for m in c.get("volumeMounts", [])}
    for key in [k for k in cfg if k.endswith("_file")]:
        if not any(str(cfg[key]).startswith(m.rstrip("/") + "/") for m in mounts):
            problems.append(f"{name}: {key}={cfg[key]} is not inside a mounted volume")
    for key in [k for k in cfg if k.endswith("_files")]:
        for path in cfg[key]:
            if not any(str(path).startswith(m.rstrip("/") + "/") for m in mounts):
                problems.append(f"{name}: {key} entry {path} is not inside a mounted volume")
    # Without the upstream key both roles run with upstream servers off and
    # webhook secrets stored in clear.
    if "upstream_key_file" not in cfg:
        problems.append(f"{name}: no upstream_key_file: upstream servers would be off")
    if not str(cfg.get("otlp_endpoint", "http://")).startswith("http://"):
        problems.append(f"{name}: otlp_endpoint must be http:// (the binary exports OTLP/HTTP without TLS)")
    gw_host = urllib.parse.urlsplit(cfg.get("gateway_public_url", "")).hostname
    allowed = cfg.get("allowed_hosts", [])
    if gw_host not in allowed:
        problems.append(f"{name}: allowed_hosts lacks the gateway host {gw_host}")
    gw_services = [s["metadata"]["name"] for s in by_kind(objs, "Service") if {p["name"] for p in s["spec"]["ports"]} == {"gateway"}]
    for svc in gw_services:
        if not any(h == svc or h.startswith(svc + ".") for h in allowed):
            problems.append(f"{name}: allowed_hosts lacks the gateway Service {svc}")
    require(not problems, "\n".join(problems))
    return f"{len(cfg)} keys"


def check_notes(notes: str, objs: list[dict[str, Any]], values: dict[str, Any]) -> str:
    require("admin token --role platform-admin" in notes or "platform-admin" in notes, "NOTES lacks the admin token step")
    require("grant create" in notes, "NOTES lacks the grant step")
    secrets_seen = []
    for sec in by_kind(objs, "Secret"):
        secrets_seen += [v for v in secret_values(sec).values() if len(v) >= 8]
    for item in (values.get("secrets") or {}).values():
        if isinstance(item, dict) and item.get("value"):
            secrets_seen.append(item["value"])
    leaks = sum(1 for s in secrets_seen if s.strip() and s.strip() in notes)
    require(not leaks, f"NOTES prints {leaks} secret value(s)")
    algorithm = ((values.get("config") or {}).get("jwt") or {}).get("algorithm", "HS256")
    if algorithm == "HS256":
        require("Prefer RS256 or EdDSA" in notes, "NOTES does not warn that HS256 puts the signing key in the runner")
    redis = (values.get("secrets") or {}).get("redisUrl") or {}
    url = redis.get("value", "redis://redis:6379/") if not redis.get("existingSecret") else ""
    if url.startswith("redis://"):
        require("WARNING: the Redis URL is plain redis://" in notes, "NOTES does not warn about a plain redis:// URL")
    return None


# --------------------------------------------------------------------------
# The binary's own validation of the rendered configuration


def corkboard_bin() -> Path:
    return Path(os.environ.get("CORKBOARD_BIN") or ROOT / "target" / "debug" / "corkboard")


def dummy_secret_file(volume: str, jwt_algorithm: str) -> tuple[str, bool]:
    """Content for a mounted secret the chart does not create; bool = is secret."""
    if volume == "jwt" and jwt_algorithm == "RS256":
        return (FIXTURES / "jwt-rs256-public.pem").read_text(), False
    if volume == "jwt" and jwt_algorithm == "EdDSA":
        return (FIXTURES / "jwt-ed25519-public.pem").read_text(), False
    return "dummy-" + secrets.token_urlsafe(36), True


def uri_password(uri: str) -> list[str]:
    found = []
    for part in uri.split(","):
        pw = urllib.parse.urlsplit(part.strip()).password
        if pw:
            found.append(urllib.parse.unquote(pw))
    return found


def check_binary_config(objs: list[dict[str, Any]], workdir: Path) -> str:
    """Run `corkboard <role> --config FILE --check-config` as each Deployment would.

    The pod's files are laid out under a temporary root (config.toml, secret
    files, /tmp) and absolute mount paths in config.toml are re-rooted there;
    the env is the container's env with Secret references resolved.
    """
    binary = corkboard_bin()
    rendered_secrets = {o["metadata"]["name"]: secret_values(o) for o in by_kind(objs, "Secret")}
    configmaps = {o["metadata"]["name"]: o.get("data", {}) for o in by_kind(objs, "ConfigMap")}
    results: list[str] = []
    failures: list[str] = []
    for dep in by_kind(objs, "Deployment"):
        spec = pod_spec(dep)
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in spec["containers"]:
            role, config_path = c["args"][0], c["args"][c["args"].index("--config") + 1]
            root = workdir / f"{dep['metadata']['name']}-{c['name']}"
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            must_not_leak: list[tuple[str, str]] = []  # (what, value): reported by what only
            cfg_text = ""
            jwt_algorithm = "HS256"
            for cm in configmaps.values():
                if "config.toml" in cm:
                    jwt_algorithm = tomllib.loads(cm["config.toml"]).get("jwt_algorithm", "HS256")
            for m in c.get("volumeMounts", []):
                vol = volumes[m["name"]]
                target = root / m["mountPath"].lstrip("/")
                if "configMap" in vol:
                    data = configmaps[vol["configMap"]["name"]]
                    key = m.get("subPath") or "config.toml"
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(data[key])
                    if m["mountPath"] == config_path:
                        cfg_text = data[key]
                elif "secret" in vol:
                    target.mkdir(parents=True, exist_ok=True)
                    src = rendered_secrets.get(vol["secret"]["secretName"])
                    for item in vol["secret"].get("items", []):
                        if src is not None:
                            content = src[item["key"]]
                            is_secret = not content.lstrip().startswith("-----BEGIN PUBLIC KEY")
                        else:
                            content, is_secret = dummy_secret_file(m["name"], jwt_algorithm)
                        (target / item["path"]).write_text(content)
                        (target / item["path"]).chmod(0o400)
                        if is_secret:
                            must_not_leak.append((f"content of {m['mountPath']}/{item['path']}", content.strip()))
                elif "emptyDir" in vol:
                    target.mkdir(parents=True, exist_ok=True)
            require(cfg_text, f"{name_of(dep)}: no mounted config.toml at {config_path}")
            # Re-root absolute paths of mounted files in one pass (the temporary
            # root may itself live under a mount path such as /tmp); longest
            # first so nested mounts win.
            mount_paths = sorted((m["mountPath"] for m in c.get("volumeMounts", [])), key=len, reverse=True)
            pattern = re.compile('"(' + "|".join(re.escape(mp) for mp in mount_paths) + ')(?=["/])')
            cfg_text = pattern.sub(lambda mt: f'"{root}{mt.group(1)}', cfg_text)
            cfg_file = root / config_path.lstrip("/")
            cfg_file.write_text(cfg_text)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root / "tmp"), "TMPDIR": str(root / "tmp")}
            for e in c.get("env", []):
                if "value" in e:
                    env[e["name"]] = str(e["value"])
                    continue
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if not ref:
                    continue
                src = rendered_secrets.get(ref["name"])
                if src is not None:
                    value = src[ref["key"]]
                elif e["name"] == "CORKBOARD_MONGODB_URI":
                    value = DUMMY_MONGODB_URI
                elif e["name"] == "CORKBOARD_REDIS_URL":
                    value = DUMMY_REDISS_URL if "redis_tls_" in cfg_text else DUMMY_REDIS_URL
                else:
                    value = "dummy-" + secrets.token_urlsafe(24)
                env[e["name"]] = value
                must_not_leak += [(f"password in {e['name']}", pw) for pw in uri_password(value)]
            cmd = [str(binary), role, "--config", str(cfg_file), "--check-config"]
            proc = run(cmd, env=env, cwd=root, timeout=60)
            output = proc.stdout + proc.stderr
            leaks = [what for what, value in must_not_leak if value and value in output]
            if proc.returncode != 0:
                failures.append(f"{name_of(dep)}: `{role} --check-config` exited {proc.returncode}:\n{output.strip()}")
            elif leaks:
                failures.append(f"{name_of(dep)}: `{role} --check-config` output shows secrets: {', '.join(leaks)}")
            else:
                results.append(role)
    require(not failures, "\n".join(failures))
    return "roles " + ", ".join(results)


def check_binary_rejects_unknown_key(objs: list[dict[str, Any]], workdir: Path) -> str:
    """The binary must refuse a config.toml with a key it does not know, naming it."""
    _, text = config_toml_of(objs)[0]
    root = workdir / "unknown-key"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    cfg = root / "config.toml"
    cfg.write_text(text + "\nbogus_deploy_check_key = 1\n")
    proc = run([str(corkboard_bin()), "server", "--config", str(cfg), "--check-config"], cwd=root, timeout=60,
               env={"PATH": os.environ.get("PATH", ""), "HOME": str(root), "CORKBOARD_MONGODB_URI": DUMMY_MONGODB_URI, "CORKBOARD_REDIS_URL": DUMMY_REDIS_URL})
    output = proc.stdout + proc.stderr
    require(proc.returncode != 0, f"exit 0 for a config with an unknown key:\n{output}")
    require("bogus_deploy_check_key" in output, f"the error does not name the bad key:\n{output}")
    return None


# --------------------------------------------------------------------------
# Generated kustomize base


BASE_FILES = {
    "ServiceAccount": "serviceaccount.yaml",
    "Deployment": None,  # one file per role
    "Service": "services.yaml",
    "PodDisruptionBudget": "pdb.yaml",
    "NetworkPolicy": "networkpolicy.yaml",
}
BASE_HEADER = (
    "# Generated by `scripts/validate-deploy --write-k8s-base` from helm/corkboard\n"
    "# (default values, release \"corkboard\"). Do not edit: change the chart and\n"
    "# regenerate; scripts/validate-deploy fails when this file is stale.\n"
)


def strip_helm(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)

    def clean_meta(meta: dict[str, Any]) -> None:
        meta.pop("namespace", None)
        labels = meta.get("labels", {})
        for k in ("helm.sh/chart", "app.kubernetes.io/managed-by"):
            labels.pop(k, None)
        ann = meta.get("annotations", {})
        for k in [k for k in ann if k.startswith("checksum/")]:
            ann.pop(k)
        if "annotations" in meta and not ann:
            meta.pop("annotations")

    clean_meta(obj["metadata"])
    if obj["kind"] == "Deployment":
        clean_meta(obj["spec"]["template"]["metadata"])
    return obj


def build_k8s_base(dest: Path) -> None:
    """Write the generated part of deploy/k8s (everything but kustomization.yaml and README.md)."""
    # The defaults plus where MongoDB and Redis are (the chart refuses to
    # open their ports to every address): ci/default-values.yaml.
    rendered = render_chart(load_values(CHART / "ci" / "default-values.yaml"), BASE_RELEASE, BASE_NAMESPACE)
    _, objs, _ = helm_stream(rendered)
    files: dict[str, list[dict[str, Any]]] = {}
    config_toml = None
    for obj in objs:
        kind = obj["kind"]
        if kind == "ConfigMap":
            config_toml = obj["data"]["config.toml"]
            continue
        if kind == "Secret" or (kind == "Pod" and "helm.sh/hook" in obj["metadata"].get("annotations", {})):
            continue  # secrets come from the overlay; helm tests are Helm-only
        require(kind in BASE_FILES, f"no base file for kind {kind}")
        fname = BASE_FILES[kind] or f"{obj['spec']['template']['metadata']['labels']['app.kubernetes.io/component']}.yaml"
        files.setdefault(fname, []).append(strip_helm(obj))
    require(config_toml is not None, "chart rendered no config.toml")
    dest.mkdir(parents=True, exist_ok=True)
    for fname, docs in files.items():
        body = "---\n".join(yaml.safe_dump(d, sort_keys=False, default_flow_style=False, width=120) for d in docs)
        (dest / fname).write_text(BASE_HEADER + body)
    (dest / "config.toml").write_text(
        config_toml.replace(
            "# Rendered by the corkboard Helm chart.",
            "# Generated from helm/corkboard by `scripts/validate-deploy --write-k8s-base`: do not edit.",
            1,
        )
    )


def base_generated_files() -> list[str]:
    return sorted({f for f in BASE_FILES.values() if f} | {"server.yaml", "runner.yaml", "config.toml"})


def check_base_up_to_date(workdir: Path) -> str:
    fresh = workdir / "k8s-base"
    shutil.rmtree(fresh, ignore_errors=True)
    build_k8s_base(fresh)
    stale = []
    for f in sorted(p.name for p in fresh.iterdir()):
        committed = K8S_BASE / f
        if not committed.exists() or committed.read_text() != (fresh / f).read_text():
            stale.append(f)
    kust = yaml.safe_load((K8S_BASE / "kustomization.yaml").read_text())
    listed = set(kust.get("resources", []))
    yaml_files = {p.name for p in fresh.iterdir() if p.suffix == ".yaml"}
    require(not stale, f"deploy/k8s is stale ({', '.join(stale)}): run scripts/validate-deploy --write-k8s-base")
    require(listed == yaml_files, f"kustomization.yaml resources {sorted(listed)} != generated {sorted(yaml_files)}")
    return None


def kustomize_build() -> tuple[str, str]:
    kubectl = shutil.which("kubectl")
    if kubectl:
        proc = run([kubectl, "kustomize", str(K8S_BASE)], timeout=120)
        require(proc.returncode == 0, f"kubectl kustomize failed:\n{proc.stderr}")
        return proc.stdout, "kubectl kustomize"
    # Without kubectl: assemble the resources and the generated ConfigMap by
    # hand (no name hash suffix, no kustomize transformers).
    kust = yaml.safe_load((K8S_BASE / "kustomization.yaml").read_text())
    parts = [(K8S_BASE / r).read_text() for r in kust.get("resources", [])]
    for gen in kust.get("configMapGenerator", []):
        data = {}
        for f in gen.get("files", []):
            key, _, path = f.partition("=") if "=" in f else (Path(f).name, "", f)
            data[key] = (K8S_BASE / path).read_text()
        parts.append(yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": gen["name"]}, "data": data}))
    return "---\n".join(parts), "assembled without kustomize (kubectl not found; no hash suffix)"


# --------------------------------------------------------------------------
# Compose


def compose_services() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())


def check_compose_structure() -> str:
    doc = compose_services()
    problems = []
    services = doc.get("services", {})
    volumes = set((doc.get("volumes") or {}).keys())
    corkboard = [n for n, s in services.items() if str(s.get("image", "")).startswith("corkboard")]
    roles = {}
    for n, s in services.items():
        deps = s.get("depends_on", {})
        for d in deps if isinstance(deps, (list, dict)) else []:
            if d not in services:
                problems.append(f"{n}: depends_on unknown service {d}")
        for v in s.get("volumes", []):
            src = v.split(":")[0]
            if not src.startswith((".", "/")) and src not in volumes:
                problems.append(f"{n}: volume {src} is not declared")
    for n in corkboard:
        s = services[n]
        cmd = s.get("command", [])
        roles[n] = cmd[0] if cmd else None
        if s.get("user") != "10001:10001" or s.get("read_only") is not True or s.get("cap_drop") != ["ALL"]:
            problems.append(f"{n}: must run as 10001:10001 with a read-only root and no capabilities")
        if "/tmp" not in s.get("tmpfs", []):
            problems.append(f"{n}: needs a tmpfs /tmp")
        build = s.get("build", {})
        if not (ROOT / "deploy" / build.get("context", ".") / build.get("dockerfile", "")).is_file():
            problems.append(f"{n}: build does not point at deploy/Dockerfile")
        env = s.get("environment", {})
        for key in env:
            if not key.startswith("CORKBOARD_") or key[len("CORKBOARD_"):].lower() not in CONFIG_KEYS:
                problems.append(f"{n}: {key} is not a corkboard configuration variable")
    counts = {r: list(roles.values()).count(r) for r in ("server", "runner")}
    if counts != {"server": 2, "runner": 1}:
        problems.append(f"expected two servers and one runner, found {counts}")
    for infra in ("mongo", "redis"):
        if "healthcheck" not in services.get(infra, {}):
            problems.append(f"{infra}: missing (or without healthcheck)")
    require(not problems, "\n".join(problems))
    return f"{len(services)} services"


def check_compose_binary(workdir: Path) -> str:
    doc = compose_services()
    done: list[str] = []
    failures: list[str] = []
    for n, s in doc["services"].items():
        if not str(s.get("image", "")).startswith("corkboard"):
            continue
        root = workdir / f"compose-{n}"
        shutil.rmtree(root, ignore_errors=True)
        (root / "tmp").mkdir(parents=True)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(root / "tmp"), "TMPDIR": str(root / "tmp")}
        must_not_leak = []
        for key, value in s.get("environment", {}).items():
            value = str(value)
            if key.endswith("_FILE"):
                path = root / value.lstrip("/")
                path.parent.mkdir(parents=True, exist_ok=True)
                content = "dummy-" + secrets.token_urlsafe(36)
                path.write_text(content)
                # As secrets-init leaves them (secret files others may read are refused).
                path.chmod(0o400)
                must_not_leak.append(content)
                value = str(path)
            env[key] = value
        proc = run([str(corkboard_bin()), s["command"][0], "--check-config"], env=env, cwd=root, timeout=60)
        output = proc.stdout + proc.stderr
        if proc.returncode != 0:
            failures.append(f"{n}: `{s['command'][0]} --check-config` exited {proc.returncode}:\n{output.strip()}")
        elif any(x in output for x in must_not_leak):
            failures.append(f"{n}: --check-config output shows a secret file's content")
        else:
            done.append(n)
    require(not failures, "\n".join(failures))
    return ", ".join(done)


# --------------------------------------------------------------------------
# Static files


def check_hadolint() -> str:
    proc = run([venv_tool("hadolint"), "--failure-threshold", "style", str(ROOT / "deploy" / "Dockerfile")])
    require(proc.returncode == 0, proc.stdout + proc.stderr)
    return None


def check_dockerfile_contract() -> str:
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    problems = []
    for needle in (
        "cargo build --release --locked -p corkboard-cli",
        'ENTRYPOINT ["/usr/local/bin/corkboard"]',
        "EXPOSE 4891 4892",
    ):
        if needle not in text:
            problems.append(f"missing: {needle}")
    users = re.findall(r"(?m)^USER\s+(\S+)", text)
    if not users or not re.fullmatch(r"10001(:10001)?", users[-1]):
        problems.append(f"final USER must be numeric 10001, got {users}")
    if len(re.findall(r"(?m)^FROM\s", text)) < 2:
        problems.append("the build must be multi-stage")
    ignore = (ROOT / ".dockerignore").read_text().split()
    for pattern in ("**/target", "**/node_modules", ".git", "**/.corkboard"):
        if pattern not in ignore:
            problems.append(f".dockerignore lacks {pattern}")
    require(not problems, "\n".join(problems))
    return None


def check_values_schema_is_valid() -> str:
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    require(schema.get("additionalProperties") is False, "top level must set additionalProperties: false")
    return None


def check_values_documented() -> str:
    """Every value of values.yaml is in the README's table, with its real default."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    table = {
        key: default.replace("\\|", "|")
        for key, default in re.findall(r"(?m)^\|\s*`([^`]+)`\s*\|\s*`(.*?)`\s*\|", readme)
    }
    problems = []

    def walk(prefix: str, node: Any) -> None:
        if prefix in table:
            documented = table[prefix]
            actual = json.dumps(node, separators=(", ", ": "))
            if documented != actual:
                problems.append(f"{prefix}: README default {documented} != values.yaml {actual}")
        elif isinstance(node, dict) and node:
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            problems.append(f"{prefix}: not in README.md's value table")

    walk("", values)
    require(not problems, "\n".join(problems))
    return f"{len(table)} values documented"


NEGATIVE_CASES = [
    ("an https:// OTLP endpoint (the binary exports over plain HTTP)", {"config": {"otlpEndpoint": "https://c:4318"}}),
    ("a metrics port that is the HTTP port", {"metrics": {"port": 4891}}),
    ("unknown top-level key", {"replicas": 3}),
    ("unknown nested key", {"server": {"autoscaling": {"enable": True}}}),
    ("wrong type", {"server": {"replicaCount": "two"}}),
    ("unsupported JWT algorithm", {"config": {"jwt": {"algorithm": "none"}}}),
    ("RS256 without a public key", {"config": {"jwt": {"algorithm": "RS256"}}}),
]


# Values the schema accepts but the render must refuse, with what the
# refusal must say.
DEFAULT_PEERS = {"networkPolicy": {"egress": {
    "mongodb": {"ports": [27017], "to": [{"podSelector": {"matchLabels": {"app": "mongo"}}}]},
    "redis": {"ports": [6379], "to": [{"podSelector": {"matchLabels": {"app": "redis"}}}]},
}}}
RENDER_FAILURES = [
    ("MongoDB egress open to every address", {}, "networkPolicy.egress.mongodb.to is empty"),
    ("Redis egress open to every address",
     {"networkPolicy": {"egress": {"mongodb": DEFAULT_PEERS["networkPolicy"]["egress"]["mongodb"]}}},
     "networkPolicy.egress.redis.to is empty"),
    ("OTLP egress open to every address",
     {**DEFAULT_PEERS, "config": {"otlpEndpoint": "http://collector:4318"}},
     "networkPolicy.egress.otlp.to is empty"),
    ("a preStop sleep that leaves the drains too little of the grace period",
     {**DEFAULT_PEERS, "runner": {"terminationGracePeriodSeconds": 30, "preStopSleepSeconds": 25}},
     "at least 10 s are needed"),
    ("previous keys without an existing Secret to hold them",
     {**DEFAULT_PEERS, "secrets": {"upstreamKey": {"previousKeys": ["old"]}}},
     "secrets.upstreamKey.previousKeys"),
]


def check_render_fails(values: dict[str, Any], needle: str) -> str:
    try:
        render_chart(values, "corkboard", "corkboard")
    except Exception as exc:  # the SDK's render error carries the template's fail message
        text = str(exc)
        require(needle in text, f"the render failed, but without naming the fix ({needle!r}):\n{text}")
        return "refused"
    raise CheckFailed(f"the chart rendered {values}")


def check_schema_rejects(values: dict[str, Any]) -> str:
    with helm.Chart.load(str(CHART)) as chart:
        try:
            chart.validate_schema(values)
        except helm.HelmValuesError as exc:
            first = str(exc).strip().splitlines()
            return first[-1].strip() if first else "rejected"
    raise CheckFailed(f"values.schema.json accepted {values}")


# --------------------------------------------------------------------------
# Main


def validate(report: Report) -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    workdir = Path(tempfile.mkdtemp(prefix="corkboard-deploy-"))
    binary = corkboard_bin()
    have_binary = binary.is_file() and os.access(binary, os.X_OK)
    print(f"helm SDK {helm.helm_sdk_version()} (libhelm_c {helm.helm_c_version()}), "
          f"kubernetes-validate {KUBERNETES_VALIDATE_VERSION}, "
          f"schemas for Kubernetes {KUBE_VERSION}", flush=True)

    # Dockerfile and static YAML.
    report.check("hadolint deploy/Dockerfile", check_hadolint)
    report.check("Dockerfile and .dockerignore contract", check_dockerfile_contract)
    static_yaml = [CHART / "Chart.yaml", CHART / "values.yaml", *sorted((CHART / "ci").glob("*.yaml")),
                   ROOT / "deploy" / "compose.yaml", *sorted(K8S_BASE.glob("*.yaml")), YAMLLINT_CONFIG]
    for path in static_yaml:
        report.check(f"yamllint {path.relative_to(ROOT)}", lambda p=path: yamllint_file(p))
    report.check("values.schema.json is a valid strict JSON schema", check_values_schema_is_valid)
    report.check("README.md documents every value", check_values_documented)
    for label, bad in NEGATIVE_CASES:
        report.check(f"schema rejects: {label}", lambda b=bad: check_schema_rejects(b))
    for label, bad, needle in RENDER_FAILURES:
        report.check(f"render refuses: {label}", lambda b=bad, n=needle: check_render_fails(b, n))

    # Chart cases.
    cases = [(p, "corkboard", "corkboard") for p in sorted((CHART / "ci").glob("*.yaml"))]
    cases.append((CHART / "ci" / "default-values.yaml", "acme-boards", "boards"))
    rendered_default: list[dict[str, Any]] = []
    for path, release, ns in cases:
        case = f"{path.stem}" + ("" if release == "corkboard" else f" (release {release} in {ns})")
        values = load_values(path)

        def lint(values: dict[str, Any] = values, ns: str = ns) -> str:
            res = helm.lint(str(CHART), values, strict=True, kube_version=f"v{KUBE_VERSION}", namespace=ns)
            bad = [m for m in res.get("messages", []) if m.get("severity", 0) >= 2] + res.get("errors", [])
            require(not bad, json.dumps(bad, indent=2))
            return f"{len(res.get('messages', []))} info messages"

        report.check(f"[{case}] helm lint --strict", lint)

        def schema_ok(values: dict[str, Any] = values) -> None:
            with helm.Chart.load(str(CHART)) as chart:
                chart.validate_schema(values)

        report.check(f"[{case}] values match values.schema.json", schema_ok)
        state: dict[str, Any] = {}

        def render(values: dict[str, Any] = values, release: str = release, ns: str = ns, state: dict[str, Any] = state, path: Path = path) -> str:
            stream, objs, notes = helm_stream(render_chart(values, release, ns))
            out = OUT / "helm" / f"{path.stem}-{release}.yaml"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(stream)
            (out.with_suffix(".NOTES.txt")).write_text(notes)
            state.update(objs=objs, notes=notes, out=out)
            return f"{len(objs)} objects -> {out.relative_to(ROOT)}"

        if report.check(f"[{case}] helm render", render) is None and "objs" not in state:
            continue
        objs = state["objs"]
        if path.stem == "default-values" and release == "corkboard":
            rendered_default = objs
        external = {v.get("existingSecret") for v in (values.get("secrets") or {}).values() if isinstance(v, dict)} - {None, ""}
        external.add(((values.get("config") or {}).get("otlp") or {}).get("headersSecret"))
        report.check(f"[{case}] kubernetes-validate --strict", lambda o=objs: check_schemas(o))
        report.check(f"[{case}] yamllint rendered manifests", lambda p=state["out"]: yamllint_file(p))
        report.check(f"[{case}] object invariants", lambda o=objs, e=external: check_invariants(o, e))
        report.check(f"[{case}] config.toml", lambda o=objs: check_config_files(o))
        report.check(f"[{case}] NOTES.txt", lambda n=state["notes"], o=objs, v=values: check_notes(n, o, v))
        if have_binary:
            report.check(f"[{case}] corkboard --check-config", lambda o=objs, c=path.stem + release: check_binary_config(o, workdir / c))
        else:
            report.skip(f"[{case}] corkboard --check-config", f"{binary} does not exist (build it: cargo build -p corkboard-cli, or set CORKBOARD_BIN)")

    # Kustomize base.
    report.check("deploy/k8s is generated from the current chart", lambda: check_base_up_to_date(workdir))
    kstate: dict[str, Any] = {}

    def kustomize() -> str:
        text, how = kustomize_build()
        out = OUT / "kustomize.yaml"
        out.write_text(text)
        kstate.update(objs=[o for o in yaml.safe_load_all(text) if o], out=out)
        return how

    if report.check("kustomize build deploy/k8s", kustomize) is not None:
        kobjs = kstate["objs"]
        base_secrets = {"corkboard-jwt", "corkboard-session-key", "corkboard-upstream-key", "corkboard-mongodb", "corkboard-redis"}
        report.check("[kustomize] kubernetes-validate --strict", lambda: check_schemas(kobjs))
        report.check("[kustomize] yamllint output", lambda: yamllint_file(kstate["out"]))
        report.check("[kustomize] object invariants", lambda: check_invariants(kobjs, base_secrets))
        report.check("[kustomize] config.toml", lambda: check_config_files(kobjs))
        if have_binary:
            report.check("[kustomize] corkboard --check-config", lambda: check_binary_config(kobjs, workdir / "kustomize"))

    # Compose.
    report.check("compose.yaml structure", check_compose_structure)
    if have_binary:
        report.check("compose services: corkboard --check-config", lambda: check_compose_binary(workdir))
        if rendered_default:
            report.check("corkboard --check-config rejects an unknown key", lambda: check_binary_rejects_unknown_key(rendered_default, workdir))
    else:
        report.skip("compose and unknown-key checks with the binary", f"{binary} does not exist")
    shutil.rmtree(workdir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["validate", "write-k8s-base"])
    args = parser.parse_args()
    if args.command == "write-k8s-base":
        build_k8s_base(K8S_BASE)
        print(f"wrote {', '.join(base_generated_files())} in {K8S_BASE.relative_to(ROOT)}")
        return 0
    report = Report()
    validate(report)
    if report.failed:
        print("\nfailed checks:\n" + "\n".join(f"  - {f}" for f in report.failed))
    if report.skipped:
        print("\nSKIPPED (not counted): " + "; ".join(report.skipped))
    print(f"deploy validation: {report.passed} passed, {len(report.failed)} failed")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
