//go:build !linux

package main

// dieWithParent has no portable equivalent outside Linux.
func dieWithParent() {}
