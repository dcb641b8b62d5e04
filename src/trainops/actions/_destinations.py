"""Where a webhook may go: public addresses, and the networks the server's settings allow.

A rule's webhook is a URL from a job's spec, and the control plane POSTs to it: without a check,
anyone who may submit a job could make the control plane reach its own loopback services, a
cloud's metadata endpoint (169.254.169.254) or the private network it sits in. So a webhook's
host is resolved once, **every** address it resolves to is checked, and the connection goes to
the checked address (a name that resolves to a public address when checked and to 127.0.0.1 when
connected cannot slip through). Loopback, link-local, private and every other non-public range
are refused unless ``webhook_networks`` allows them (``loopback``, ``link-local``, ``private`` or
a network such as ``10.1.0.0/16``). Redirects are never followed.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["NETWORK_NAMES", "WebhookPolicy", "resolve_checked"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Names a setting may use for the usual ranges.
NETWORK_NAMES: dict[str, tuple[str, ...]] = {
    "loopback": ("127.0.0.0/8", "::1/128"),
    "link-local": ("169.254.0.0/16", "fe80::/10"),
    "private": ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"),
}


@dataclass(frozen=True, slots=True)
class WebhookPolicy:
    """The networks a webhook may reach beyond public addresses (none by default)."""

    allowed: tuple[Network, ...] = ()

    @classmethod
    def from_names(cls, names: Iterable[str]) -> WebhookPolicy:
        """From a setting's entries (names of :data:`NETWORK_NAMES`, or networks);
        :class:`ValueError` names a bad entry."""
        networks: list[Network] = []
        for name in names:
            entry = name.strip().lower()
            for text in NETWORK_NAMES.get(entry, (entry,)):
                try:
                    networks.append(ipaddress.ip_network(text, strict=False))
                except ValueError:
                    raise ValueError(
                        f"{name!r} is not a network (10.0.0.0/8, fd00::/8) "
                        f"nor one of {', '.join(NETWORK_NAMES)}"
                    ) from None
        return cls(tuple(networks))

    def refusal(self, address: Address) -> str | None:
        """Why ``address`` may not be reached, or ``None`` when it may."""
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if any(address in network for network in self.allowed):
            return None
        if address.is_global and not address.is_multicast:
            return None
        return f"{address}, a {_kind(address)} address"


def _kind(address: Address) -> str:
    if address.is_unspecified:
        return "reserved (unspecified)"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_private:
        return "private"
    return "reserved (not public)"


def resolve_checked(host: str, port: int, policy: WebhookPolicy) -> list[str]:
    """The addresses to connect to for ``host``, in the resolver's order: every address it
    resolves to must be allowed; :class:`PermissionError` says which is not (and which setting
    allows it), :class:`OSError` that it does not resolve."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    for address in addresses:
        problem = policy.refusal(address)
        if problem is not None:
            raise PermissionError(
                f"{host} resolves to {problem}: webhooks go to public addresses only, unless "
                "webhook_networks in the server's config.yaml (or TRAINOPS_WEBHOOK_NETWORKS) "
                "allows it"
            )
    if not addresses:
        raise OSError(f"{host} resolves to no address")
    return list(dict.fromkeys(str(address) for address in addresses))
