// Package driverversion parses and orders NVIDIA driver versions as users
// write them in driver.version: dotted numbers such as 535.154.05, or an
// image digest.
package driverversion
