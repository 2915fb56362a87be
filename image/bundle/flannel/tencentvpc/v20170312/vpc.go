// Package v20170312 declares only what flannel's tencent-vpc backend
// (pkg/backend/tencentvpc) uses of Tencent Cloud's VPC API, so that flanneld
// compiles without the SDK, which the module proxy does not serve. Every call
// fails: the backend reports that it is not built in, and nothing else in
// flanneld reaches this package.
package v20170312

import "errors"

// errNotBuiltIn is what every call of the tencent-vpc backend gets.
var errNotBuiltIn = errors.New("flannel's tencent-vpc backend is not built into Cairn's flanneld (the Tencent Cloud SDK is not available); use the vxlan backend")

// Client is a VPC API client that cannot reach the API.
type Client struct{}

// NewClientWithSecretId returns a client whose calls all fail.
func NewClientWithSecretId(secretID, secretKey, region string) (*Client, error) {
	return &Client{}, errNotBuiltIn
}

// Filter selects route tables.
type Filter struct {
	Name   *string
	Values []*string
}

// Route is one entry of a route table.
type Route struct {
	RouteId              *uint64
	DestinationCidrBlock *string
	GatewayType          *string
	GatewayId            *string
	RouteType            *string
	Enabled              *bool
}

// RouteTable is a VPC route table.
type RouteTable struct {
	RouteTableId *string
	RouteSet     []*Route
}

// DescribeRouteTablesRequest asks for the route tables matching Filters.
type DescribeRouteTablesRequest struct{ Filters []*Filter }

// DescribeRouteTablesResponse holds the route tables found.
type DescribeRouteTablesResponse struct {
	Response *struct{ RouteTableSet []*RouteTable }
}

// DeleteRoutesRequest removes Routes from a route table.
type DeleteRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

// DeleteRoutesResponse is the answer to DeleteRoutes.
type DeleteRoutesResponse struct{}

// CreateRoutesRequest adds Routes to a route table.
type CreateRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

// CreateRoutesResponse is the answer to CreateRoutes.
type CreateRoutesResponse struct{}

// NewDescribeRouteTablesRequest returns an empty request.
func NewDescribeRouteTablesRequest() *DescribeRouteTablesRequest {
	return &DescribeRouteTablesRequest{}
}

// NewDeleteRoutesRequest returns an empty request.
func NewDeleteRoutesRequest() *DeleteRoutesRequest { return &DeleteRoutesRequest{} }

// NewCreateRoutesRequest returns an empty request.
func NewCreateRoutesRequest() *CreateRoutesRequest { return &CreateRoutesRequest{} }

// DescribeRouteTables fails: the API is not built in.
func (c *Client) DescribeRouteTables(*DescribeRouteTablesRequest) (*DescribeRouteTablesResponse, error) {
	return nil, errNotBuiltIn
}

// DeleteRoutes fails: the API is not built in.
func (c *Client) DeleteRoutes(*DeleteRoutesRequest) (*DeleteRoutesResponse, error) {
	return nil, errNotBuiltIn
}

// CreateRoutes fails: the API is not built in.
func (c *Client) CreateRoutes(*CreateRoutesRequest) (*CreateRoutesResponse, error) {
	return nil, errNotBuiltIn
}
