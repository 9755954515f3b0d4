package ociimage

// Spec describes one image: its binary, where the binary comes from and how it runs.
type Spec struct {
	// Name is the binary's name and the image's: statecast/<Name>.
	Name string
	// Package is the Go package of the binary, relative to the module root.
	Package string
	// Description is the image's org.opencontainers.image.description label.
	Description string
	// Ports are the TCP ports the binary serves with its usual config (EXPOSE).
	Ports []int
	// Cmd is the default argument list (the entrypoint is the binary).
	Cmd []string
}

// The layout every image shares.
const (
	// Repository prefixes the image names: statecast/player.
	Repository = "statecast"
	// BinDir holds the binary: the entrypoint is BinDir/<Name>.
	BinDir = "/usr/local/bin"
	// ConfigDir is where the daemons' default -config points; deployments mount their
	// config files there.
	ConfigDir = "/etc/statecast"
	// UID and GID of the user the images run as: not root, and the id distroless images
	// call nonroot, so that volume permissions carry over.
	UID = 65532
	GID = 65532
	// Source is the org.opencontainers.image.source label.
	Source = "https://github.com/statecast/statecast"
	// License is the org.opencontainers.image.licenses label (SPDX).
	License = "Apache-2.0"
)

// Specs are statecast's images.
var Specs = []Spec{
	{
		Name: "distributor", Package: "./cmd/distributor",
		Description: "statecast distributor: publishes PostgreSQL views into compacted Kafka topics",
		Ports:       []int{9102},
		Cmd:         []string{"-config", ConfigDir + "/distributor.yaml"},
	},
	{
		Name: "player", Package: "./cmd/player",
		Description: "statecast player: delivers a stream exactly once and in order to caches over gRPC",
		Ports:       []int{7070, 7071},
		Cmd:         []string{"-config", ConfigDir + "/player.yaml"},
	},
	{
		Name: "cachectl", Package: "./cmd/cachectl",
		Description: "statecast cachectl: tail, get, stats and validate",
		Cmd:         []string{"help"},
	},
	{
		Name: "sportsbook", Package: "./examples/sportsbook/cmd/sportsbook",
		Description: "statecast example service: an HTTP API served from an embedded cacheclient",
		Ports:       []int{8080},
		Cmd:         []string{"-listen", ":8080"},
	},
}

// Lookup returns the Spec called name.
func Lookup(name string) (Spec, bool) {
	for _, s := range Specs {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}
