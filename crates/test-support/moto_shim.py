"""moto's server with the fixes the Terraform tests need: gaps of moto 5.2.5 where real AWS accepts a request.

Each fix is a small patch of one moto function, applied before the server starts; none changes what a module
asks for. Started by `MotoServer::start` (src/moto.rs) as `python moto_shim.py -H 127.0.0.1 -p PORT`.

1. Security group rules for protocols without ports. AWS accepts an ingress rule with protocol "4" (IP in IP,
   which Calico uses) and no ports; moto converts the absent ports with int(None) and answers 500. Here a rule
   of a protocol other than TCP, UDP and ICMP(v6) keeps its ports unset, as AWS shows it.
"""

import sys

from moto.ec2.models import security_groups

_PORTED_PROTOCOLS = {"tcp", "6", "udp", "17", "icmp", "1", "icmpv6", "58", "-1", "all"}
_original_rule_init = security_groups.SecurityGroupRule.__init__


def _rule_init(self, ec2_backend, ip_protocol, group_id, from_port, to_port, *args, **kwargs):
    portless = (
        ip_protocol is not None
        and str(ip_protocol).lower() not in _PORTED_PROTOCOLS
        and from_port is None
        and to_port is None
    )
    if not portless:
        _original_rule_init(self, ec2_backend, ip_protocol, group_id, from_port, to_port, *args, **kwargs)
        return
    # moto skips the port conversion only for "-1"; the protocol is restored right after.
    _original_rule_init(self, ec2_backend, "-1", group_id, from_port, to_port, *args, **kwargs)
    self.ip_protocol = str(ip_protocol)


security_groups.SecurityGroupRule.__init__ = _rule_init

if __name__ == "__main__":
    from moto.server import main

    sys.exit(main(sys.argv[1:]))
