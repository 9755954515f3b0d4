// Command godriver is the Go client's driver for the conformance suite (package
// conformance): it runs a cacheclient.Client with raw views as the suite's line protocol
// asks (conformance/doc.go, "Line protocol") and reports what it applied.
//
// Files: doc.go, main.go (the driver).
package main
