// Package natstest holds the helpers jetagent's tests share to run against
// a real NATS: an embedded JetStream server per test on a random loopback
// port with its store in the test's temporary directory, a connection to
// it, a bounded context, and the goleak options every package that starts
// NATS goroutines needs. It imports no jetagent package, so any package's
// internal tests can use it.
package natstest
