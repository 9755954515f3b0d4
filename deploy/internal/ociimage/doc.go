// Package ociimage builds statecast's container images without a container engine and
// without pulling a base image: each image is one layer holding a static Go binary (and
// the few files a non-root process expects) on an empty base, with its entrypoint, user,
// exposed ports and OCI labels set. `make images` (deploy/images) writes them as
// tarballs that `docker load` reads; the repository's Dockerfile builds the same images
// with Docker, and the tests hold the two to one Spec.
package ociimage
