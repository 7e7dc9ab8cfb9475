// Package enrolltest is a fake agent on the enrollment socket for the plugin's tests: it
// decides by a function, and on add binds a real TCP listener on the capture port in the
// pod's netns (standing in for the node proxy) and reports it the way the agent does.
package enrolltest
