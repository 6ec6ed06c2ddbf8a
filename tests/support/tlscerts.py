"""Throw-away TLS material made with the real `openssl` for one test module.

    certs = make_certs(tmp_dir)
    certs.ca        a CA certificate (what Prometheus's tls_config.ca_file names)
    certs.cert      a server certificate for 127.0.0.1 and localhost, signed by the CA, valid 30 days
    certs.key       its key (unencrypted, 0600)
    certs.other_key a key of no certificate here (a certificate that does not match its key)
    certs.expired   a certificate for the same key, valid only on 2020-01-01
    certs.short     one valid for 2 days (the doctor warns: renew it)
    certs.encrypted the server key encrypted with a passphrase (the monitor has none to give)

A missing openssl fails under CI and skips elsewhere, with the reason printed.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest

_CA_CONF = """[ca]
default_ca = test
[test]
dir = %(dir)s
database = $dir/index.txt
serial = $dir/serial
new_certs_dir = $dir
default_md = sha256
policy = any
copy_extensions = copy
[any]
commonName = supplied
"""


class Certs(NamedTuple):
    ca: Path
    cert: Path
    key: Path
    other_key: Path
    expired: Path
    short: Path
    encrypted: Path


def openssl() -> str:
    path = shutil.which("openssl")
    if path:
        return path
    if os.environ.get("CI"):
        pytest.fail("openssl is not installed under CI")
    print("skipped: openssl is not installed")
    pytest.skip("openssl is not installed")


def _run(*args: str, cwd: Path) -> None:
    done = subprocess.run([openssl(), *args], cwd=str(cwd), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, "openssl %s: %s" % (" ".join(args), done.stderr[-2000:])


def _key(path: Path, cwd: Path) -> None:
    _run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path), cwd=cwd)
    os.chmod(str(path), 0o600)


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    d = directory
    _key(d / "ca.key", d)
    # The extensions a strict verifier wants (Python 3.13's default context sets VERIFY_X509_STRICT):
    # a CA with its key usage, a server certificate naming its issuer's key and its own purpose.
    _run("req", "-x509", "-key", "ca.key", "-out", "ca.pem", "-days", "30", "-subj", "/CN=svc test CA",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    _key(d / "server.key", d)
    _key(d / "other.key", d)
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=critical,CA:FALSE\n"
                               "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
                               "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n")
    _run("req", "-new", "-key", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=d)
    for name, days in (("server.pem", "30"), ("short.pem", "2")):
        _run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", name, "-days", days, "-extfile", "san.cnf", cwd=d)
    # `openssl x509` cannot back-date; `openssl ca` takes explicit dates.
    (d / "ca").mkdir(exist_ok=True)
    (d / "ca" / "index.txt").write_text("")
    (d / "ca" / "serial").write_text("1000\n")
    (d / "ca.cnf").write_text(_CA_CONF % {"dir": str(d / "ca")})
    _run("ca", "-batch", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key", "-in", "server.csr",
         "-out", "expired.pem", "-startdate", "20200101000000Z", "-enddate", "20200102000000Z", "-notext", cwd=d)
    _run("pkey", "-in", "server.key", "-aes256", "-passout", "pass:not-given", "-out", "encrypted.key", cwd=d)
    return Certs(d / "ca.pem", d / "server.pem", d / "server.key", d / "other.key", d / "expired.pem",
                 d / "short.pem", d / "encrypted.key")
