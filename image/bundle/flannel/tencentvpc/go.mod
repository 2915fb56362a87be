// A stand-in for Tencent Cloud's VPC SDK module, which the module proxy does
// not serve. flannel's main imports its tencent-vpc backend unconditionally;
// the flannel wrapper (../go.mod) replaces the SDK by this module so that
// flanneld builds. Cairn uses the vxlan backend; selecting tencent-vpc fails
// with a clear error.
module github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc

go 1.26.8
