from adapters.plugin._pb import memory_pb2 as _memory_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ModelRef(_message.Message):
    __slots__ = ("provider", "id")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    provider: str
    id: str
    def __init__(self, provider: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class CountTokensRequest(_message.Message):
    __slots__ = ("content", "model_ref")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    MODEL_REF_FIELD_NUMBER: _ClassVar[int]
    content: _containers.RepeatedCompositeFieldContainer[_memory_pb2.ContentBlock]
    model_ref: ModelRef
    def __init__(self, content: _Optional[_Iterable[_Union[_memory_pb2.ContentBlock, _Mapping]]] = ..., model_ref: _Optional[_Union[ModelRef, _Mapping]] = ...) -> None: ...

class CountTokensResult(_message.Message):
    __slots__ = ("count", "exact")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    EXACT_FIELD_NUMBER: _ClassVar[int]
    count: int
    exact: bool
    def __init__(self, count: _Optional[int] = ..., exact: _Optional[bool] = ...) -> None: ...
