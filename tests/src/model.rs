//! A small builder of ONNX `ModelProto`s for tests that need hand-made (often broken) models.

use swflow_frontend::onnx::proto::{
    attribute_proto::AttributeType, tensor_proto::DataLocation, tensor_shape_proto::dimension::Value as Dim,
    tensor_shape_proto::Dimension, type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    StringStringEntryProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

pub const FLOAT: i32 = 1;
pub const INT64: i32 = 7;

/// A model under construction, one ai.onnx opset.
pub struct ModelBuilder {
    pub model: ModelProto,
}

/// An attribute value for [`ModelBuilder::node`].
pub enum Attr {
    Float(f32),
    Str(&'static str),
}

pub fn value_info(name: &str, elem: i32, dims: &[i64]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| Dimension {
            value: Some(Dim::DimValue(d)),
            denotation: None,
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto { dim }),
            })),
            denotation: None,
        }),
        ..Default::default()
    }
}

/// A float tensor with its data in `raw_data`.
pub fn f32_tensor(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(FLOAT),
        raw_data: Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ..Default::default()
    }
}

pub fn i64_tensor(name: &str, dims: &[i64], values: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(INT64),
        int64_data: values.to_vec(),
        ..Default::default()
    }
}

/// A float tensor whose data lives in an external file.
pub fn external_tensor(name: &str, dims: &[i64], location: &str) -> TensorProto {
    let kv = |k: &str, v: &str| StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v.into()),
    };
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(FLOAT),
        data_location: Some(DataLocation::External as i32),
        external_data: vec![kv("location", location)],
        ..Default::default()
    }
}

impl ModelBuilder {
    pub fn new(opset: i64) -> ModelBuilder {
        ModelBuilder {
            model: ModelProto {
                ir_version: Some(8),
                opset_import: vec![OperatorSetIdProto {
                    domain: Some(String::new()),
                    version: Some(opset),
                }],
                graph: Some(GraphProto {
                    name: Some("test".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
        }
    }

    fn graph(&mut self) -> &mut GraphProto {
        self.model.graph.as_mut().expect("the builder always has a graph")
    }

    pub fn input(mut self, name: &str, elem: i32, dims: &[i64]) -> Self {
        self.graph().input.push(value_info(name, elem, dims));
        self
    }

    pub fn output(mut self, name: &str) -> Self {
        self.graph().output.push(value_info(name, FLOAT, &[]));
        self
    }

    pub fn init(mut self, t: TensorProto) -> Self {
        self.graph().initializer.push(t);
        self
    }

    pub fn node(mut self, name: &str, op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<(&str, Attr)>) -> Self {
        let attribute = attrs
            .into_iter()
            .map(|(k, v)| {
                let mut a = AttributeProto {
                    name: Some(k.into()),
                    ..Default::default()
                };
                match v {
                    Attr::Float(f) => (a.f, a.r#type) = (Some(f), Some(AttributeType::Float as i32)),
                    Attr::Str(s) => (a.s, a.r#type) = (Some(s.as_bytes().to_vec()), Some(AttributeType::String as i32)),
                }
                a
            })
            .collect();
        self.graph().node.push(NodeProto {
            name: Some(name.into()),
            op_type: Some(op.into()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            attribute,
            ..Default::default()
        });
        self
    }

    pub fn bytes(&self) -> Vec<u8> {
        prost::Message::encode_to_vec(&self.model)
    }
}
