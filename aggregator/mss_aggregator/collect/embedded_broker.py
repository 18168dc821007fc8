"""An in-process MQTT broker (amqtt) on a free loopback port, for ``make demo``.

amqtt speaks MQTT 3.1.1 only, forgets anonymous sessions on disconnect and
does not redeliver unacknowledged messages, so it is a demo default, not a
production broker: point ``--broker`` at Mosquitto or EMQX for real fleets.

amqtt 0.12 loops over its table of subscriptions with awaits inside (sending a
connecting client the retained messages, broadcasting a message) while other
clients' SUBSCRIBEs add topics to it, so a fleet connecting at once made it
raise "dictionary changed size during iteration" (asyncio printed the
traceback; the client's connection was dropped).  :class:`_Snapshots` makes
those loops run over a copy: the fix, not a filter on the log.
"""
import asyncio
import logging
import threading

from mss_aggregator.ports import free_port


class _Snapshots(dict):
    """amqtt's subscriptions table, iterated over a copy of its keys or items.  A topic added
    meanwhile is missed by that loop only: its SUBSCRIBE sends the retained messages itself."""

    def __iter__(self):
        return iter(list(dict.keys(self)))

    def items(self):
        return list(dict.items(self))


class EmbeddedBroker:
    """An amqtt broker in a thread of this process, anonymous, on 127.0.0.1 (MQTT 3.1.1 only).

    Parameters
    ----------
    port : int, optional
        The TCP port (None: a free one).

    Attributes
    ----------
    port : int
    url : str
        ``mqtt://127.0.0.1:<port>``, what an :class:`~mss_aggregator.collect.links.MqttEndpoint` takes.
    """

    def __init__(self, port=None):
        self.port = port or free_port()
        self.url = f"mqtt://127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._broker = None
        self._thread = threading.Thread(target=self._run, name="embedded-broker", daemon=True)
        self._ready = threading.Event()

    def _run(self):
        from amqtt.broker import Broker

        asyncio.set_event_loop(self._loop)
        config = {"listeners": {"default": {"type": "tcp", "bind": f"127.0.0.1:{self.port}"}},
                  "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin":
                              {"allow_anonymous": True}}}

        async def start():
            self._broker = Broker(config)  # must be made inside the running loop
            if type(self._broker._subscriptions) is not dict:  # a new amqtt: check its loops again
                raise RuntimeError("amqtt's Broker._subscriptions is not the dict it was in 0.12")
            self._broker._subscriptions = _Snapshots()
            await self._broker.start()

        self._loop.run_until_complete(start())
        self._ready.set()
        self._loop.run_forever()

    def start(self):
        """Start listening; RuntimeError if the broker is not up within 15 s.

        Returns
        -------
        EmbeddedBroker
            This broker, started.
        """
        logging.getLogger("amqtt").setLevel(logging.ERROR)
        self._thread.start()
        if not self._ready.wait(15):
            raise RuntimeError("embedded broker did not start")
        return self

    def stop(self):
        """Shut the broker down and end its thread."""
        asyncio.run_coroutine_threadsafe(self._broker.shutdown(), self._loop).result(15)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
