#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_contrib.py SOURCE_DIR BUILD_DIR: checks contrib/ against the daemon,
offline (no Kubernetes, no Docker, no Grafana here):

- the Prometheus alert rules load and pass their unit tests (promtool);
- every metric and label the rules and the Grafana dashboard use is on the
  /metrics page of a running weftd, and /livez and /readyz answer;
- the Kubernetes manifests parse, and their ports, paths, probe paths and
  arguments match the cluster configuration they carry, which weftd
  --check-config accepts (with certificates made by weft-gen-certs);
- the Dockerfile's runtime packages hold every shared library that the
  installed programs and libraries link against (ldd, then dpkg -S), and
  its exposed ports are the configuration's.

Exits 77 (skipped) when promtool or python3-yaml is missing.
"""
import configparser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

try:
    import yaml
except ImportError:
    print("SKIP: python3-yaml is not installed (scripts/install-deps.sh --all)")
    sys.exit(77)
if shutil.which("promtool") is None:
    print("SKIP: promtool is not installed (scripts/install-deps.sh --all)")
    sys.exit(77)

SRC, BUILD = sys.argv[1], sys.argv[2]
CONTRIB = os.path.join(SRC, "contrib")
WEFTD = os.path.join(BUILD, "services", "weftd", "weftd")
GEN_CERTS = os.path.join(SRC, "scripts", "gen-certs.sh")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def ok(msg):
    print("ok: " + msg)


# ---- Prometheus rules --------------------------------------------------------
prom = os.path.join(CONTRIB, "prometheus")
for cmd in (["promtool", "check", "rules", "weft-alerts.yml"],
            ["promtool", "test", "rules", "weft-alerts.test.yml"]):
    r = subprocess.run(cmd, cwd=prom, capture_output=True, text=True)
    if r.returncode != 0:
        fail("%s: %s%s" % (" ".join(cmd), r.stdout, r.stderr))
    else:
        ok(" ".join(cmd))

# Every expression of the rules and the dashboard, with where it is from.
exprs = []
with open(os.path.join(prom, "weft-alerts.yml")) as f:
    for g in yaml.safe_load(f)["groups"]:
        for rule in g["rules"]:
            exprs.append(("alert " + rule["alert"], rule["expr"]))
with open(os.path.join(CONTRIB, "grafana", "weft-dashboard.json")) as f:
    dash = json.load(f)
for p in dash["panels"]:
    for t in p["targets"]:
        exprs.append(("panel " + p["title"], t["expr"]))

# ---- A running weftd ---------------------------------------------------------
work = tempfile.mkdtemp(prefix="weft-contrib-")
ini = os.path.join(work, "cluster.ini")
with open(ini, "w") as f:
    f.write("[cluster]\nname = contrib\n"
            "[node n1]\nhost = 127.0.0.1\nport = 0\n"
            "[node n2]\nhost = 127.0.0.1\nport = 0\n"
            "[weftd]\nmetrics_listen = 127.0.0.1:0\nlog_level = warn\n")
node = subprocess.Popen([WEFTD, "--config", ini, "--id", "n1"],
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                        text=True)
try:
    line = node.stdout.readline()
    m = re.search(r"metrics=127\.0\.0\.1:(\d+)", line)
    if m is None:
        raise SystemExit("weftd did not start: %r" % line)
    base = "http://127.0.0.1:%s" % m.group(1)
    page = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    for path in ("/livez", "/readyz"):
        try:
            code = urllib.request.urlopen(base + path, timeout=10).status
        except urllib.error.HTTPError as e:
            code = e.code
        # Ready needs the members; alive does not.
        if code not in ((200,) if path == "/livez" else (200, 503)):
            fail("%s answered %d" % (path, code))
        else:
            ok("%s answers %d" % (path, code))
finally:
    node.terminate()
    node.wait(timeout=30)

series = {}  # metric name -> set of its label names
for l in page.splitlines():
    if not l or l.startswith("#"):
        continue
    m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?", l)
    labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ""))
    series.setdefault(m.group(1), set()).update(labels)

# Labels Prometheus adds at scrape time, and the histogram's.
ADDED = {"job", "instance", "le"}
for where, e in exprs:
    names = set(re.findall(r"\b((?:weft|process)_[a-z0-9_]+)", e))
    used = set()
    for grp in re.findall(r"by \(([^)]*)\)", e):
        used.update(x.strip() for x in grp.split(","))
    for n in names:
        if n not in series:
            fail("%s: %s is not on weftd's /metrics" % (where, n))
            continue
        missing = used - ADDED - series[n]
        if missing and not any(used - ADDED <= series[o]
                                for o in names if o in series):
            fail("%s: %s has no label %s" % (where, n, ", ".join(missing)))
ok("%d expressions' metrics and labels are on /metrics" % len(exprs))

# ---- Kubernetes -------------------------------------------------------------
with open(os.path.join(CONTRIB, "kubernetes", "weft.yaml")) as f:
    docs = {d["kind"]: d for d in yaml.safe_load_all(f)}
svc, cm, sts = docs["Service"], docs["ConfigMap"], docs["StatefulSet"]
conf = configparser.ConfigParser()
conf.read_string(cm["data"]["cluster.ini"])
node_secs = [s for s in conf.sections() if s.startswith("node ")]
ports = {int(conf[s]["port"]) for s in node_secs}
metrics_port = int(conf["weftd"]["metrics_listen"].rsplit(":", 1)[1])
spec = sts["spec"]
pod = spec["template"]["spec"]
ctr = pod["containers"][0]
cports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
sports = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
if ports != {cports["peer"]} or sports["peer"] != cports["peer"]:
    fail("the peer port: nodes %s, container %s, service %s" %
         (ports, cports["peer"], sports["peer"]))
if metrics_port != cports["metrics"] or sports["metrics"] != metrics_port:
    fail("the metrics port: config %d, container %s, service %s" %
         (metrics_port, cports["metrics"], sports["metrics"]))
ids = ["%s-%d" % (sts["metadata"]["name"], i) for i in range(spec["replicas"])]
if sorted("node " + i for i in ids) != sorted(node_secs):
    fail("pods %s, nodes %s" % (ids, node_secs))
if spec["serviceName"] != svc["metadata"]["name"]:
    fail("serviceName is not the Service")
for i in ids:
    host = conf["node " + i]["host"]
    if not host.startswith("%s.%s." % (i, svc["metadata"]["name"])):
        fail("node %s's host %s is not its pod's name" % (i, host))
probes = {ctr["livenessProbe"]["httpGet"]["path"],
          ctr["readinessProbe"]["httpGet"]["path"]}
if probes != {"/livez", "/readyz"}:
    fail("probes %s" % probes)
mounts = {v["name"]: v["mountPath"] for v in ctr["volumeMounts"]}
args = ctr["args"]
opt = {args[k]: args[k + 1] for k in range(0, len(args) - 1, 2)}
if opt.get("--config") != mounts["config"]:
    fail("--config %s is not the mounted %s" % (opt.get("--config"),
                                                  mounts["config"]))
for k in ("--tls-cert", "--tls-key"):
    if not opt.get(k, "").startswith(mounts["tls"] + "/"):
        fail("%s is not under the TLS mount" % k)
if not conf["tls"]["ca"].startswith(mounts["tls"] + "/"):
    fail("[tls] ca is not under the TLS mount")
if svc["spec"].get("clusterIP") != "None":
    fail("the Service is not headless")
if pod["securityContext"]["runAsUser"] == 0:
    fail("the pod runs as root")
ok("the manifests' ports, names, paths and probes agree")

# The carried configuration is one weftd accepts, as each pod would run it.
certs = os.path.join(work, "tls")
subprocess.run(["sh", GEN_CERTS, certs] + ids, check=True,
               capture_output=True)
text = cm["data"]["cluster.ini"].replace(mounts["tls"], certs)
# Here, the pods' names are this host.
for i in ids:
    text = text.replace(conf["node " + i]["host"], "127.0.0.1")
local = os.path.join(work, "k8s.ini")
with open(local, "w") as f:
    f.write(text)
for i in ids:
    a = [WEFTD, "--check-config", "--config", local, "--id", i]
    for k in ("--tls-cert", "--tls-key"):
        a += [k, opt[k].replace("$(POD_NAME)", i).replace(mounts["tls"],
                                                          certs)]
    r = subprocess.run(a, capture_output=True, text=True)
    if r.returncode != 0:
        fail("weftd --check-config for %s: %s" % (i, r.stderr.strip()))
ok("weftd --check-config accepts the ConfigMap for every pod")

# ---- Docker -----------------------------------------------------------------
with open(os.path.join(CONTRIB, "docker", "Dockerfile")) as f:
    dockerfile = f.read()
runtime = re.search(r"^# runtime: (.*)$", dockerfile, re.M).group(1).split()
stage = dockerfile.split("\nFROM ")[-1]
for p in runtime:
    if not re.search(r"\b%s\b" % re.escape(p), stage):
        fail("runtime package %s is not installed in the last stage" % p)
exposed = set(map(int, re.search(r"^EXPOSE (.*)$", dockerfile,
                                 re.M).group(1).split()))
if exposed != {cports["peer"], cports["metrics"]}:
    fail("EXPOSE %s, container ports %s" % (exposed, cports))
prefix = os.path.join(work, "install")
subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix],
               check=True, capture_output=True)
needed = set()
owners = {}  # library path -> its package (or None): one dpkg -S each


def owner(lib):
    if lib not in owners:
        owners[lib] = None
        for cand in (lib, "/usr" + lib, os.path.realpath(lib)):
            r = subprocess.run(["dpkg", "-S", cand], capture_output=True,
                               text=True)
            if r.returncode == 0:
                owners[lib] = r.stdout.split(":")[0]
                break
    return owners[lib]


for root, _, files in os.walk(prefix):
    for name in files:
        path = os.path.join(root, name)
        if os.path.islink(path) or not os.access(path, os.X_OK) and \
                ".so" not in name:
            continue
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
        out = subprocess.run(["ldd", path], capture_output=True,
                             text=True).stdout
        for lib in re.findall(r"=> (/\S+)", out):
            if lib.startswith(prefix):
                continue
            pkg = owner(lib)
            if pkg is None:
                fail("%s: no Debian package has %s" % (name, lib))
            else:
                needed.add(pkg)
# In debian:12-slim already: libc, and apt's own libraries (libsystemd0
# and what it links, which a build with libsystemd-dev links too).
base = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g", "libsystemd0",
        "libcap2", "libgcrypt20", "libgpg-error0", "liblz4-1", "liblzma5",
        "libzstd1"}
missing = needed - base - set(runtime)
if missing:
    fail("the Dockerfile's runtime lacks %s" % ", ".join(sorted(missing)))
ok("runtime packages %s hold every library of the install (%s)" %
   (" ".join(runtime), " ".join(sorted(needed))))
shutil.rmtree(work)

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("contrib: all checks passed")
