// Package devenv is the local development environment behind `cachectl dev` (make demo):
// an in-process Kafka-protocol broker (franz-go kfake), the demo sportsbook database
// (deploy/demo), the distributor running the demo config, and a tail that prints what
// the stream carries.
//
// Concurrency: Run owns every goroutine it starts and returns only after they stopped;
// Tail runs in the caller's goroutine.
package devenv
