// Package fuzz holds native fuzz targets for every parser of hostile input.
package fuzz
