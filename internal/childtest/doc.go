// Package childtest runs a test's body in a child process of the test
// binary, for tests whose failure before a fix is the process dying (a
// panic in a goroutine the code under test starts ends every test of the
// package with it): the parent sees the child's panic as a test failure.
package childtest
