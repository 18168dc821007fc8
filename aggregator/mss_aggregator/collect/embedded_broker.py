"""An in-process MQTT broker (amqtt) on a free loopback port, for ``make demo``.

amqtt speaks MQTT 3.1.1 only, forgets anonymous sessions on disconnect and
does not redeliver unacknowledged messages, so it is a demo default, not a
production broker: point ``--broker`` at Mosquitto or EMQX for real fleets.
"""
import asyncio
import logging
import threading

from mss_aggregator.ports import free_port


class EmbeddedBroker:
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
            await self._broker.start()

        self._loop.run_until_complete(start())
        self._ready.set()
        self._loop.run_forever()

    def start(self):
        logging.getLogger("amqtt").setLevel(logging.ERROR)
        self._thread.start()
        if not self._ready.wait(15):
            raise RuntimeError("embedded broker did not start")
        return self

    def stop(self):
        asyncio.run_coroutine_threadsafe(self._broker.shutdown(), self._loop).result(15)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
