// Package ociimage builds statecast's container images without a container engine and
// without pulling a base image: each image is one layer holding a static Go binary (and
// the few files a non-root process expects) on an empty base, with its entrypoint, user,
// exposed ports and OCI labels set. `make images` (deploy/images) writes them as
// tarballs that `docker load` reads; the repository's Dockerfile builds the same images
// with Docker, and the tests hold the two to one Spec.
//
// Files: spec.go (Spec: each image's binary, package, ports and default arguments; the
// layout every image shares; Specs, Lookup), build.go (Build: the version stamped into a
// binary, and the static go build that makes it), image.go (a Spec and a binary made into
// a layer, an image, its labels and tags, and a tarball).
package ociimage
