//! The APIs the codec knows: one line per API, pairing its key with kafka-protocol's request and
//! response types. Decoding a request and encoding a response (and the client-side mirror used by
//! `corral load` and the tests) dispatch through the functions generated here.

use anyhow::{anyhow, Result};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::pyconv::{FromPy, ToPy};

macro_rules! apis {
    ($($key:literal => $req:ty, $resp:ty;)*) => {
        /// (min, max) versions kafka-protocol can decode and encode for this key.
        pub fn codec_versions(api_key: i16) -> Option<(i16, i16)> {
            match api_key {
                $($key => Some((<$req as Message>::VERSIONS.min, <$req as Message>::VERSIONS.max)),)*
                _ => None,
            }
        }

        pub fn request_header_version(api_key: i16, version: i16) -> i16 {
            match api_key {
                $($key => <$req as HeaderVersion>::header_version(version),)*
                _ => 1,
            }
        }

        pub fn response_header_version(api_key: i16, version: i16) -> i16 {
            match api_key {
                $($key => <$resp as HeaderVersion>::header_version(version),)*
                _ => 0,
            }
        }

        pub fn decode_request<'py>(py: Python<'py>, api_key: i16, version: i16, body: &mut Bytes) -> Result<Bound<'py, PyAny>> {
            match api_key {
                $($key => Ok(<$req>::decode(body, version)?.to_py(py)?),)*
                _ => Err(anyhow!("unknown api key {api_key}")),
            }
        }

        pub fn encode_response(api_key: i16, version: i16, body: &Bound<'_, PyAny>, out: &mut BytesMut) -> PyResult<()> {
            match api_key {
                $($key => <$resp>::from_py(body)?.encode(out, version).map_err(value_error),)*
                _ => Err(PyValueError::new_err(format!("unknown api key {api_key}"))),
            }
        }

        pub fn encode_request(api_key: i16, version: i16, body: &Bound<'_, PyAny>, out: &mut BytesMut) -> PyResult<()> {
            match api_key {
                $($key => <$req>::from_py(body)?.encode(out, version).map_err(value_error),)*
                _ => Err(PyValueError::new_err(format!("unknown api key {api_key}"))),
            }
        }

        pub fn decode_response<'py>(py: Python<'py>, api_key: i16, version: i16, body: &mut Bytes) -> Result<Bound<'py, PyAny>> {
            match api_key {
                $($key => Ok(<$resp>::decode(body, version)?.to_py(py)?),)*
                _ => Err(anyhow!("unknown api key {api_key}")),
            }
        }
    };
}

apis! {
    0 => ProduceRequest, ProduceResponse;
    1 => FetchRequest, FetchResponse;
    2 => ListOffsetsRequest, ListOffsetsResponse;
    3 => MetadataRequest, MetadataResponse;
    8 => OffsetCommitRequest, OffsetCommitResponse;
    9 => OffsetFetchRequest, OffsetFetchResponse;
    10 => FindCoordinatorRequest, FindCoordinatorResponse;
    11 => JoinGroupRequest, JoinGroupResponse;
    12 => HeartbeatRequest, HeartbeatResponse;
    13 => LeaveGroupRequest, LeaveGroupResponse;
    14 => SyncGroupRequest, SyncGroupResponse;
    15 => DescribeGroupsRequest, DescribeGroupsResponse;
    16 => ListGroupsRequest, ListGroupsResponse;
    17 => SaslHandshakeRequest, SaslHandshakeResponse;
    18 => ApiVersionsRequest, ApiVersionsResponse;
    19 => CreateTopicsRequest, CreateTopicsResponse;
    20 => DeleteTopicsRequest, DeleteTopicsResponse;
    21 => DeleteRecordsRequest, DeleteRecordsResponse;
    22 => InitProducerIdRequest, InitProducerIdResponse;
    24 => AddPartitionsToTxnRequest, AddPartitionsToTxnResponse;
    25 => AddOffsetsToTxnRequest, AddOffsetsToTxnResponse;
    26 => EndTxnRequest, EndTxnResponse;
    27 => WriteTxnMarkersRequest, WriteTxnMarkersResponse;
    28 => TxnOffsetCommitRequest, TxnOffsetCommitResponse;
    29 => DescribeAclsRequest, DescribeAclsResponse;
    30 => CreateAclsRequest, CreateAclsResponse;
    31 => DeleteAclsRequest, DeleteAclsResponse;
    32 => DescribeConfigsRequest, DescribeConfigsResponse;
    33 => AlterConfigsRequest, AlterConfigsResponse;
    35 => DescribeLogDirsRequest, DescribeLogDirsResponse;
    36 => SaslAuthenticateRequest, SaslAuthenticateResponse;
    37 => CreatePartitionsRequest, CreatePartitionsResponse;
    42 => DeleteGroupsRequest, DeleteGroupsResponse;
    44 => IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse;
    47 => OffsetDeleteRequest, OffsetDeleteResponse;
    48 => DescribeClientQuotasRequest, DescribeClientQuotasResponse;
    50 => DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse;
    51 => AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse;
    60 => DescribeClusterRequest, DescribeClusterResponse;
    61 => DescribeProducersRequest, DescribeProducersResponse;
    65 => DescribeTransactionsRequest, DescribeTransactionsResponse;
    66 => ListTransactionsRequest, ListTransactionsResponse;
    68 => ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse;
    69 => ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse;
    76 => ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse;
    77 => ShareGroupDescribeRequest, ShareGroupDescribeResponse;
    78 => ShareFetchRequest, ShareFetchResponse;
    79 => ShareAcknowledgeRequest, ShareAcknowledgeResponse;
    90 => DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse;
    91 => AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse;
    92 => DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse;
}

fn value_error(e: anyhow::Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_versions_follow_flexible_versions() {
        // Metadata is flexible from v9, ApiVersions from v3, CreateTopics from v5.
        assert_eq!(
            (request_header_version(3, 8), request_header_version(3, 9)),
            (1, 2)
        );
        assert_eq!(
            (response_header_version(3, 8), response_header_version(3, 9)),
            (0, 1)
        );
        assert_eq!(
            (request_header_version(18, 2), request_header_version(18, 3)),
            (1, 2)
        );
        assert_eq!(
            (request_header_version(19, 4), request_header_version(19, 5)),
            (1, 2)
        );
    }

    #[test]
    fn codec_versions_are_kafka_protocols() {
        assert_eq!(codec_versions(18), Some((0, 4)));
        assert_eq!(codec_versions(3), Some((0, 13)));
        assert_eq!(codec_versions(17), Some((0, 1)));
        assert_eq!(codec_versions(23), None);
    }
}
