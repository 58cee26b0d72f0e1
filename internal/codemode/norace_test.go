//go:build !race

package codemode

const raceEnabled = false
