//go:build !linux

package netio

func gettid() int { return 0 }
