// Package statefile reads and writes the small JSON state files a node daemon keeps on a
// hostPath across restarts (the agent's on-demand admissions and CNI-enrolled pods).
//
// A state file lives in a directory other processes on the node may write, so reading one is
// reading untrusted input: Read opens it without following a symlink, refuses anything but a
// regular file (a FIFO or device would hang or never end), and refuses a file over its size
// bound before reading it. A file that does not parse is moved aside with MoveAside, kept for
// a post-mortem and out of the way of the next write. WriteAtomic replaces a file so that a
// reader, or a crash, sees the old content or the new, never a torn write.
package statefile
