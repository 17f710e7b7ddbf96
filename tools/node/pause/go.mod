// The pause process of the real node's pod sandboxes (see pause.go): no dependencies, no registry image.
module kubeopera.local/tools/node/pause

go 1.26.0
