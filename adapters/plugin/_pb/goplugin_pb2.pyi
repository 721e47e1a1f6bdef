from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ConnInfo(_message.Message):
    __slots__ = ("service_id", "network", "address", "knock")
    class Knock(_message.Message):
        __slots__ = ("knock", "ack", "error")
        KNOCK_FIELD_NUMBER: _ClassVar[int]
        ACK_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        knock: bool
        ack: bool
        error: str
        def __init__(self, knock: _Optional[bool] = ..., ack: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...
    SERVICE_ID_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    KNOCK_FIELD_NUMBER: _ClassVar[int]
    service_id: int
    network: str
    address: str
    knock: ConnInfo.Knock
    def __init__(self, service_id: _Optional[int] = ..., network: _Optional[str] = ..., address: _Optional[str] = ..., knock: _Optional[_Union[ConnInfo.Knock, _Mapping]] = ...) -> None: ...

class StdioData(_message.Message):
    __slots__ = ("channel", "data")
    class Channel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        INVALID: _ClassVar[StdioData.Channel]
        STDOUT: _ClassVar[StdioData.Channel]
        STDERR: _ClassVar[StdioData.Channel]
    INVALID: StdioData.Channel
    STDOUT: StdioData.Channel
    STDERR: StdioData.Channel
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    channel: StdioData.Channel
    data: bytes
    def __init__(self, channel: _Optional[_Union[StdioData.Channel, str]] = ..., data: _Optional[bytes] = ...) -> None: ...
