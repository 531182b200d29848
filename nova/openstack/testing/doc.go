// Package testing holds the unit tests of nova/openstack: canned Nova,
// placement and keystone answers served by httptest, in gophercloud's
// style (fixtures_test.go has the fixtures, requests_test.go the tests).
package testing
