// Package sub is a package the fixture README does not list.
package sub
