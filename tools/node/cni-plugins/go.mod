// Wrapper module: the CNI loopback plugin, so that the real node's one network config is valid (its pods use the host network).
module kubeopera.local/tools/node/cni-plugins

go 1.26.0

tool github.com/containernetworking/plugins/plugins/main/loopback

require (
	github.com/containernetworking/cni v1.3.0 // indirect
	github.com/containernetworking/plugins v1.9.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/sys v0.35.0 // indirect
)
