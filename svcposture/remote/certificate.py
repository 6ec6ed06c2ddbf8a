"""The scrape listener's certificate and key: checked, then made into a TLS server context.

`server_context(cert, key, now)` reads both PEM files (`SVC_METRICS_TLS_CERT`,
`SVC_METRICS_TLS_KEY`) and returns an `ssl.SSLContext` that speaks TLS 1.2 or
later with them, and the instant the certificate expires. A certificate that
has expired or is not valid yet, a key that does not belong to it, an
encrypted key (the monitor would otherwise stop and ask a terminal for its
passphrase) or a file that cannot be read is refused with one sentence
naming the file and the fix (CertificateError). The doctor makes the same
checks and adds its warnings (expires soon, key readable by others).

`validity(pem)` reads the certificate's notBefore and notAfter from its DER:
the standard library parses a certificate's fields only off a live
connection, and these two are all that is needed.
"""
from __future__ import annotations

import base64
import calendar
import os
import stat
from typing import Any, List, Optional, Tuple

from ..errors import SvcpostureError

__all__ = ["CertificateError", "certificate_validity", "key_exposure", "server_context", "utc_text", "validity"]

# A PEM certificate chain is a few KB; a file past this is no certificate.
MAX_PEM_BYTES = 1 << 20
_BEGIN = b"-----BEGIN CERTIFICATE-----"
_END = b"-----END CERTIFICATE-----"
_SEQUENCE, _INTEGER, _EXPLICIT_0, _UTC_TIME, _GENERALIZED_TIME = 0x30, 0x02, 0xA0, 0x17, 0x18


class CertificateError(SvcpostureError):
    """The certificate or key cannot serve; the message is one sentence naming the file and the fix."""


class _EncryptedKey(SvcpostureError):
    """The key asked for a passphrase, which the monitor never has (caught here, never raised further)."""


def _no_passphrase() -> Any:
    raise _EncryptedKey()


def server_context(cert: str, key: str, now: float) -> Tuple[Any, float]:
    """(a TLS 1.2+ server context over `cert` and `key`, the certificate's notAfter); CertificateError."""
    import ssl

    not_after = certificate_validity(cert, now)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key, password=_no_passphrase)
    except _EncryptedKey:
        raise CertificateError("the TLS key %s is encrypted, and the monitor has no passphrase to give it: "
                               "write it out unencrypted (`openssl pkey -in %s -out NEW.key`), mode 0600"
                               % (key, key)) from None
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise CertificateError("the TLS key %s is not the key of the certificate %s: give "
                                   "SVC_METRICS_TLS_KEY the key the certificate was issued for" % (key, cert)) from None
        raise CertificateError("the TLS key %s is not a PEM private key the monitor can read: give "
                               "SVC_METRICS_TLS_KEY the certificate's unencrypted key" % key) from None
    except OSError as exc:
        raise CertificateError("the TLS key %s cannot be read (%s): make it readable by this user"
                               % (key, exc.strerror or exc)) from None
    context.set_alpn_protocols(["http/1.1"])
    return context, not_after


def certificate_validity(cert: str, now: float) -> float:
    """The notAfter of the first certificate in the PEM file `cert`, once it is known to be valid at
    `now`; CertificateError for a file that cannot be read or holds no certificate valid now."""
    try:
        with open(cert, "rb") as fh:
            pem = fh.read(MAX_PEM_BYTES + 1)
    except OSError as exc:
        raise CertificateError("the TLS certificate %s cannot be read (%s): make it readable by this user"
                               % (cert, exc.strerror or exc)) from None
    try:
        if len(pem) > MAX_PEM_BYTES:
            raise ValueError("too long")
        not_before, not_after = validity(pem)
    except ValueError:
        raise CertificateError("the TLS certificate %s holds no PEM certificate (-----BEGIN CERTIFICATE-----): "
                               "give SVC_METRICS_TLS_CERT the certificate, the key goes in SVC_METRICS_TLS_KEY"
                               % cert) from None
    if now >= not_after:
        raise CertificateError("the TLS certificate %s expired on %s: renew it, then restart the monitor"
                               % (cert, utc_text(not_after)))
    if now < not_before:
        raise CertificateError("the TLS certificate %s is not valid before %s: check this machine's clock, or "
                               "the certificate's dates" % (cert, utc_text(not_before)))
    return not_after


def key_exposure(key: str) -> Optional[str]:
    """Why the key file is more exposed than its certificate should be (others may read it), or None."""
    try:
        mode = stat.S_IMODE(os.stat(key).st_mode)
    except OSError:
        return None
    if mode & 0o004:
        return "the TLS key %s is readable by every user (mode %04o): chmod o-r %s" % (key, mode, key)
    return None


def utc_text(instant: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(instant))


# ---------------------------------------------------------------- the two dates, from DER

def validity(pem: bytes) -> Tuple[float, float]:
    """(notBefore, notAfter) as epoch seconds of the first certificate in `pem`; ValueError when there is none."""
    start = pem.find(_BEGIN)
    end = pem.find(_END, start + 1)
    if start < 0 or end < 0:
        raise ValueError("no PEM certificate")
    try:
        der = base64.b64decode(b"".join(pem[start + len(_BEGIN):end].split()), validate=True)
    except (ValueError, TypeError):
        raise ValueError("the PEM block is not base64") from None
    return _der_validity(der)


def _der_validity(der: bytes) -> Tuple[float, float]:
    """Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL, serialNumber,
    signature, issuer, validity SEQUENCE { notBefore, notAfter }, ... }, ... } (RFC 5280 4.1)."""
    tag, start, _ = _tlv(der, 0)
    _expect(tag, _SEQUENCE)
    tag, pos, _ = _tlv(der, start)
    _expect(tag, _SEQUENCE)
    tag, _, after = _tlv(der, pos)
    if tag == _EXPLICIT_0:
        pos = after
    for expected in (_INTEGER, _SEQUENCE, _SEQUENCE):
        tag, _, pos = _tlv(der, pos)
        _expect(tag, expected)
    tag, inner, _ = _tlv(der, pos)
    _expect(tag, _SEQUENCE)
    times: List[float] = []
    for _ in range(2):
        tag, value, inner = _tlv(der, inner)
        times.append(_time(tag, der[value:inner]))
    return times[0], times[1]


def _tlv(der: bytes, pos: int) -> Tuple[int, int, int]:
    """(tag, start of the value, end of the value) of the DER element at `pos`."""
    if pos + 2 > len(der):
        raise ValueError("truncated DER")
    tag, length = der[pos], der[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if not 1 <= count <= 4 or pos + count > len(der):
            raise ValueError("bad DER length")
        length = int.from_bytes(der[pos:pos + count], "big")
        pos += count
    if pos + length > len(der):
        raise ValueError("truncated DER")
    return tag, pos, pos + length


def _expect(tag: int, expected: int) -> None:
    if tag != expected:
        raise ValueError("unexpected DER tag 0x%02x" % tag)


def _time(tag: int, raw: bytes) -> float:
    """UTCTime (YYMMDDHHMMSSZ; 50-99 are 19xx) or GeneralizedTime (YYYYMMDDHHMMSSZ) as epoch seconds."""
    text = raw.decode("ascii", "replace")
    if tag == _UTC_TIME and len(text) == 13:
        year = int(text[:2])
        text = ("19" if year >= 50 else "20") + text
    elif not (tag == _GENERALIZED_TIME and len(text) == 15):
        raise ValueError("unexpected certificate time")
    if not (text.endswith("Z") and text[:-1].isdigit()):
        raise ValueError("unexpected certificate time")
    fields = (int(text[0:4]), int(text[4:6]), int(text[6:8]), int(text[8:10]), int(text[10:12]), int(text[12:14]))
    return float(calendar.timegm(fields + (0, 0, 0)))
