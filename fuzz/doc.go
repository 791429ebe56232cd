// Package fuzz holds native fuzz targets for every parser of hostile input
// that can be reached through an exported API. A differential target that
// compares unexported code with a reference lives in that code's package
// (internal/relay's FuzzDecodeResult and FuzzRelayAnswer); .ci/run fuzzes
// both packages.
package fuzz
