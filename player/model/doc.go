// Package model holds the Promela model of the player's target-queue protocol
// (targetqueue.pml) and the test that checks it with spin: safety (in order, no duplicate),
// liveness (everything is eventually delivered, under weak fairness), and mutants without
// terms (or with other seeded bugs) that spin must reject. README.md maps the model to the
// code of package player. The package has no Go API; it exists for its test.
package model
