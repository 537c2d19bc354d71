"""Where the operator may connect for an Agent: the egress policy of the shared pool.

An Agent's author names the URLs of its model, MCP servers and HTTP tools, and the operator
connects to them from its own place in the network, with Secrets in the headers. Without a
policy an author could make it connect to loopback, the cloud's metadata service, the API server
or any service of the cluster, and learn from the probe whether each port answered (a port
scanner), or from an HTTP tool's result, sent on to a model the author may run, what it said.

A destination is allowed when:

* its URL is under an allowed URL prefix (same scheme, host and port, the path under the
  prefix's). A prefix whose host is a name owns that name: a URL of that host under no prefix is
  refused, so a prefix allows what it names and nothing beside it;
* its host is an allowed host name, whatever the name resolves to: naming it is trusting it;
* or every address it connects to is in an allowed network, or outside every refused range:
  loopback, link-local, unspecified, multicast and reserved addresses always (``ALWAYS_REFUSED``),
  then the ranges the policy is given (the API server's addresses, the cluster's ranges).

Addresses are checked where the connection is made: an IP literal before the request is handed
to aiohttp (which connects to a literal without resolving it), a host name in the resolver of
the shared pool (``ScreeningResolver``), on the very addresses aiohttp then connects to — so a
name that resolves to a refused address is refused however it resolved before (DNS rebinding),
and every request a client sends is checked alike, a followed redirect included. A refused
destination is refused before any connection is tried, so a refusal says what the policy says
and nothing about the port: closed and filtered look the same as open.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from urllib.parse import urlsplit

import aiohttp
import httpx2
from aiohttp.abc import AbstractResolver, ResolveResult

from agentrun._base import FrozenModel

Address = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network

ALLOW_HINT = "allow it in the chart's egress.allow"


class Refused(FrozenModel):
    """A range of addresses the policy refuses, and what it is called in a refusal."""

    network: Network
    why: str


ALWAYS_REFUSED: tuple[Refused, ...] = tuple(
    Refused(network=ip_network(network), why=why)
    for network, why in (
        ("127.0.0.0/8", "loopback"),
        ("::1/128", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("fe80::/10", "link-local"),
        ("0.0.0.0/8", "unspecified"),
        ("::/128", "unspecified"),
        ("224.0.0.0/4", "multicast"),
        ("ff00::/8", "multicast"),
        ("240.0.0.0/4", "reserved"),
    )
)
"""Refused unless an allowance names them, whatever else the policy is given."""

CLUSTER_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
"""Taken for the cluster's service and pod ranges until narrowed: every private range, since
the operator cannot know which of them its cluster uses (the chart's egress.clusterRanges)."""


class EgressRefused(httpx2.TransportError):
    """The policy refused a destination; no connection to it was tried.

    A transport error, so that the clients and SDKs over the pool fail the request as they fail
    any other; ``refusal_in`` finds it again in what they wrap it in."""

    def __init__(self, destination: str, why: str) -> None:
        self.destination = destination
        self.why = why
        super().__init__(f"egress policy refuses {destination} ({why}); {ALLOW_HINT}")

    def said_for(self, field: str) -> str:
        """The refusal, naming the spec's field whose URL it refused."""
        return f"egress policy refuses {self.destination} ({self.why}) for {field}; {ALLOW_HINT}"


def refusal_in(error: BaseException | None) -> EgressRefused | None:
    """The policy's refusal behind ``error`` (its causes and exception groups), if any."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, EgressRefused):
            return error
        if isinstance(error, BaseExceptionGroup):
            found = (refusal_in(each) for each in error.exceptions)
            return next((each for each in found if each is not None), None)
        error = error.__cause__ or error.__context__
    return None


NAT64 = ip_network("64:ff9b::/96")
"""The well-known NAT64 prefix: where a cluster has NAT64, an address in it reaches the IPv4
address in its last 32 bits, so it is judged as that address."""


def _address(host: str) -> Address | None:
    """The address ``host`` is, judged as the IPv4 address an IPv6 one stands for (mapped or
    NAT64), or None for a host name."""
    try:
        found = ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(found, IPv6Address):
        if found.ipv4_mapped is not None:
            return found.ipv4_mapped
        if found in NAT64:
            return IPv4Address(int(found) & 0xFFFFFFFF)
    return found


def _host(host: str) -> str:
    return host.lower().rstrip(".")


class _Prefix(FrozenModel):
    scheme: str
    host: str
    port: int | None
    path: str

    @classmethod
    def of(cls, prefix: str) -> _Prefix:
        url = httpx2.URL(prefix)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"{prefix!r} is not an http(s) URL prefix")
        return cls(scheme=url.scheme, host=_host(url.host), port=url.port, path=url.path)

    def holds(self, url: httpx2.URL) -> bool:
        if (url.scheme, _host(url.host), url.port) != (self.scheme, self.host, self.port):
            return False
        base = self.path.rstrip("/")
        return not base or url.path == base or url.path.startswith(base + "/")


class EgressPolicy(FrozenModel):
    """What the operator may connect to for an Agent (see the module's notes)."""

    allow_prefixes: tuple[_Prefix, ...] = ()
    allow_hosts: frozenset[str] = frozenset()
    allow_networks: tuple[Network, ...] = ()
    refused: tuple[Refused, ...] = ALWAYS_REFUSED

    @classmethod
    def of(cls, allow: Iterable[str], refuse: Iterable[tuple[str, str]] = ()) -> EgressPolicy:
        """A policy allowing each entry of ``allow`` — a URL prefix (it has ``://``), a network
        in CIDR form or an address, or else a host name — and refusing ``ALWAYS_REFUSED`` and
        each (network, why) of ``refuse``.

        Raises:
            ValueError: an entry that is none of those, naming it.
        """
        prefixes: list[_Prefix] = []
        hosts: set[str] = set()
        networks: list[Network] = []
        for entry in (each.strip() for each in allow):
            if not entry:
                continue
            if "://" in entry:
                prefixes.append(_Prefix.of(entry))
            elif (network := _network(entry)) is not None:
                networks.append(network)
            elif entry.replace("-", "").replace(".", "").isalnum():
                hosts.add(_host(entry))
            else:
                raise ValueError(f"{entry!r} is neither a URL prefix, a CIDR nor a host name")
        refused = [*ALWAYS_REFUSED]
        for given, why in refuse:
            found = _network(given)
            if found is None:
                raise ValueError(f"{given!r} is not a CIDR or an address")
            refused.append(Refused(network=found, why=why))
        return cls(
            allow_prefixes=tuple(prefixes),
            allow_hosts=frozenset(hosts),
            allow_networks=tuple(networks),
            refused=tuple(refused),
        )

    def trusts(self, host: str) -> bool:
        """Whether ``host`` is allowed by its name: a host or a prefix's host name."""
        name = _host(host)
        return name in self.allow_hosts or any(each.host == name for each in self.allow_prefixes)

    def why_refused(self, host: str) -> str | None:
        """Why the address ``host`` is refused (the range's name), or None if it is allowed."""
        address = _address(host)
        if address is None:
            return None
        if any(address in network for network in self.allow_networks):
            return None
        return next((each.why for each in self.refused if address in each.network), None)

    def before_connecting(self, url: httpx2.URL) -> None:
        """Refuse ``url`` if its URL or literal address already says so; a host name that is
        not trusted is left to the resolver, which checks what it resolves to.

        Raises:
            EgressRefused: the policy refuses it.
        """
        if any(prefix.holds(url) for prefix in self.allow_prefixes):
            return
        host = _host(url.host)
        if host in self.allow_hosts:
            return
        literal = _address(host) is not None
        if not literal and any(prefix.host == host for prefix in self.allow_prefixes):
            raise EgressRefused(
                f"{url.scheme}://{url.netloc.decode()}{url.path}",
                f"{host} is allowed only under the chart's egress.allow prefixes",
            )
        why = self.why_refused(host)
        if why is not None:
            raise EgressRefused(host, why)

    def screened(self, host: str, found: list[ResolveResult]) -> list[ResolveResult]:
        """What ``host`` resolved to, less the addresses the policy refuses.

        Raises:
            EgressRefused: every address is refused.
        """
        if self.trusts(host):
            return found
        kept = [each for each in found if self.why_refused(each["host"]) is None]
        if found and not kept:
            first = found[0]["host"]
            raise EgressRefused(host, f"it resolves to {first}, {self.why_refused(first)}")
        return kept

    async def screen(self, url: str) -> None:
        """Check ``url`` as a connection to it would be checked, without connecting (for a URL
        nothing connects to until a run calls it); a name that does not resolve passes.

        Raises:
            EgressRefused: the policy refuses it.
        """
        parsed = httpx2.URL(url)
        self.before_connecting(parsed)
        if self.trusts(parsed.host) or _address(parsed.host) is not None:
            return
        resolver = aiohttp.ThreadedResolver()
        try:
            found = await resolver.resolve(parsed.host, parsed.port or 0, socket.AF_UNSPEC)
        except OSError:
            return
        finally:
            await resolver.close()
        self.screened(parsed.host, found)


def _network(text: str) -> Network | None:
    try:
        return ip_network(text.strip(), strict=False)
    except ValueError:
        return None


def fixed_host(url: str) -> bool:
    """Whether a URL template's host is fixed (no ``{placeholder}`` in it), so checkable now."""
    return "{" not in urlsplit(url).netloc


class ScreeningResolver(AbstractResolver):
    """aiohttp's default resolver, with what the policy refuses taken out of every answer."""

    def __init__(self, policy: EgressPolicy) -> None:
        self.policy = policy
        self.resolver: AbstractResolver = aiohttp.DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return self.policy.screened(host, await self.resolver.resolve(host, port, family))

    async def close(self) -> None:
        await self.resolver.close()
