//! Typed access to a node's attributes.

use super::proto::{attribute_proto::AttributeType, AttributeProto, NodeProto, TensorProto};

/// A node's attributes; every getter checks the attribute's type.
pub(super) struct Attrs<'a> {
    node: &'a NodeProto,
}

impl<'a> Attrs<'a> {
    pub fn new(node: &'a NodeProto) -> Attrs<'a> {
        Attrs { node }
    }

    fn get(&self, name: &str, want: AttributeType) -> Result<Option<&'a AttributeProto>, String> {
        let Some(a) = self.node.attribute.iter().find(|a| a.name() == name) else {
            return Ok(None);
        };
        // Old exporters leave `type` unset; then the value field decides.
        if a.r#type() != want && a.r#type() != AttributeType::Undefined {
            return Err(format!(
                "attribute '{name}' must be {}, not {}",
                want.as_str_name(),
                a.r#type().as_str_name()
            ));
        }
        Ok(Some(a))
    }

    pub fn has(&self, name: &str) -> bool {
        self.node.attribute.iter().any(|a| a.name() == name)
    }

    pub fn int_opt(&self, name: &str) -> Result<Option<i64>, String> {
        Ok(self.get(name, AttributeType::Int)?.map(|a| a.i()))
    }

    pub fn int(&self, name: &str, default: i64) -> Result<i64, String> {
        Ok(self.int_opt(name)?.unwrap_or(default))
    }

    /// An int attribute that must be 0 or 1.
    pub fn flag(&self, name: &str, default: bool) -> Result<bool, String> {
        match self.int(name, default as i64)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(format!("attribute '{name}' must be 0 or 1, got {v}")),
        }
    }

    pub fn float(&self, name: &str, default: f32) -> Result<f32, String> {
        Ok(self.get(name, AttributeType::Float)?.map_or(default, |a| a.f()))
    }

    pub fn float_opt(&self, name: &str) -> Result<Option<f32>, String> {
        Ok(self.get(name, AttributeType::Float)?.map(|a| a.f()))
    }

    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>, String> {
        Ok(self.get(name, AttributeType::Ints)?.map(|a| a.ints.clone()))
    }

    pub fn floats(&self, name: &str) -> Result<Option<Vec<f32>>, String> {
        Ok(self.get(name, AttributeType::Floats)?.map(|a| a.floats.clone()))
    }

    pub fn string(&self, name: &str, default: &str) -> Result<String, String> {
        match self.get(name, AttributeType::String)? {
            None => Ok(default.to_string()),
            Some(a) => String::from_utf8(a.s().to_vec()).map_err(|_| format!("attribute '{name}' is not UTF-8")),
        }
    }

    pub fn tensor(&self, name: &str) -> Result<Option<&'a TensorProto>, String> {
        Ok(self.get(name, AttributeType::Tensor)?.and_then(|a| a.t.as_ref()))
    }

    /// Non-negative ints, one per spatial dimension, or `default` repeated when absent.
    pub fn spatial(&self, name: &str, rank: usize, default: usize) -> Result<Vec<usize>, String> {
        match self.ints(name)? {
            None => Ok(vec![default; rank]),
            Some(v) if v.len() == rank => v
                .iter()
                .map(|&x| usize::try_from(x).map_err(|_| format!("attribute '{name}' has negative entry {x}")))
                .collect(),
            Some(v) => Err(format!("attribute '{name}' has {} entries, expected {rank}", v.len())),
        }
    }
}
